// The OpenAI-compatible surface: POST /v1/chat/completions, /v1/responses and
// /v1/embeddings, and GET /v1/models.
// Bodies pass through as bytes; every error has the OpenAI shape {error: {message, type, code}}.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { CallOptions, ClientReadableStream, ClientUnaryCall, Metadata, ServiceError } from '@grpc/grpc-js';
import type { CoreClients } from '../core-client.js';
import { corkPerTick } from '../cork.js';
import { fromGrpcError } from '../errors.js';
import { call, metadataOf } from '../grpc-call.js';
import { holdWhileBehind } from '../hold.js';

const OPENAI_TYPE: Record<string, string> = {
  invalid_request: 'invalid_request_error',
  unauthenticated: 'authentication_error',
  forbidden: 'permission_error',
  llm_error: 'upstream_error',
  not_found: 'invalid_request_error',
  blocked: 'permission_error',
  rate_limited: 'rate_limit_error',
  budget_exhausted: 'insufficient_quota',
};

/** ABC's own errors in the OpenAI shape; an upstream's error answer is relayed as it came. */
function sendOpenAiError(reply: FastifyReply, error: unknown): FastifyReply {
  const { statusCode, body } = fromGrpcError(error);
  const details = body.error.details as { upstream_status?: number; upstream_body?: string } | undefined;
  if (details?.upstream_body !== undefined && details.upstream_status) {
    return reply.code(details.upstream_status).type('application/json').send(details.upstream_body);
  }
  const param = (body.error.details as { field?: string } | undefined)?.field ?? null;
  return reply.code(statusCode).send({
    error: { message: body.error.message, type: OPENAI_TYPE[body.error.code] ?? 'api_error', code: body.error.code, param },
  });
}

export function llmRoutes(app: FastifyInstance, core: CoreClients): void {
  // Keep the caller's bytes: the body is parsed here only to route and to name a bad field.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.setErrorHandler((error: FastifyError, _req, reply) => {
    if (error.statusCode === 413) return reply.code(413).send({ error: { message: error.message, type: 'invalid_request_error', code: 'body_too_large', param: null } });
    if (typeof (error as unknown as ServiceError).code === 'number') return sendOpenAiError(reply, error);
    return reply.code(400).send({ error: { message: error.message, type: 'invalid_request_error', code: 'invalid_request', param: null } });
  });

  /** A relayed POST: the bytes pass through; `stream: true` answers server-sent events. */
  const relay = (path: string, whole: Unary, streamed?: Streamed) =>
    app.post<{ Body: Buffer }>(path, async (req, reply) => {
      const body = req.body;
      if (!Buffer.isBuffer(body)) {
        return reply.code(400).send({ error: { message: 'the body must be JSON (content-type: application/json)', type: 'invalid_request_error', code: 'invalid_request', param: null } });
      }
      let stream = false;
      try {
        stream = (JSON.parse(body.toString('utf8')) as { stream?: unknown }).stream === true;
      } catch {
        return reply.code(400).send({ error: { message: 'the body is not valid JSON', type: 'invalid_request_error', code: 'invalid_request', param: null } });
      }
      const runId = typeof req.headers['x-run-id'] === 'string' ? req.headers['x-run-id'] : '';
      if (stream && streamed) return relayStream(streamed, req, reply, body, runId);
      const res = await call(whole, { body, runId }, req);
      return reply.code(res.status).headers({ ...res.headers, 'x-abc-request-id': res.requestId }).send(Buffer.from(res.body));
    });

  relay('/v1/chat/completions', core.llm.createChatCompletion.bind(core.llm), (body, metadata) => core.llm.streamChatCompletion(body, metadata));
  relay('/v1/responses', core.llm.createResponse.bind(core.llm), (body, metadata) => core.llm.streamResponse(body, metadata));
  relay('/v1/embeddings', core.llm.createEmbedding.bind(core.llm));

  app.get('/v1/models', async (req, reply) => {
    const res = await call(core.llm.listModels.bind(core.llm), {}, req);
    return reply.code(res.status).type('application/json').send(Buffer.from(res.body));
  });
}

type Answer = { status: number; headers: Record<string, string>; body: Uint8Array; requestId: string };
type Unary = (req: { body: Buffer; runId: string }, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, res: Answer) => void) => ClientUnaryCall;
type Sse = { data: Uint8Array; event?: string };
type Streamed = (req: { body: Buffer; runId: string; batched: boolean }, metadata: Metadata) => ClientReadableStream<Sse & { done: boolean; requestId: string; events: Sse[] }>;

/**
 * Events go out as SSE the moment they arrive; the HTTP status is sent with the
 * first one. Named events (the Responses API's) keep their name; a chat
 * completion stream ends with `[DONE]`, a Responses stream with its final event.
 */
function relayStream(open: Streamed, req: FastifyRequest, reply: FastifyReply, body: Buffer, runId: string): Promise<void> {
  return new Promise((resolve) => {
    const stream = open({ body, runId, batched: true }, metadataOf(req));
    let started = false;
    let named = false;
    const start = (requestId: string) => {
      if (started) return;
      started = true;
      reply.hijack();
      reply.raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-abc-request-id': requestId });
    };
    const cork = corkPerTick(reply.raw);
    // A client that stops reading holds the core's read of the upstream, not the gateway's memory.
    const hold = holdWhileBehind(stream, reply.raw, () => reply.raw.writableLength, 'llm');
    stream.on('data', (msg: Sse & { done: boolean; requestId: string; events: Sse[] }) => {
      start(msg.requestId);
      cork();
      if (msg.done) {
        if (!named) reply.raw.write('data: [DONE]\n\n');
        return;
      }
      // Batched: the events that reached the core together, in one message.
      for (const e of msg.events.length ? msg.events : [msg]) {
        named ||= Boolean(e.event);
        reply.raw.write(`${e.event ? `event: ${e.event}\n` : ''}data: ${Buffer.from(e.data).toString('utf8')}\n\n`);
      }
      hold.check();
    });
    stream.on('end', () => {
      if (started) reply.raw.end();
      resolve();
    });
    stream.on('error', (error: ServiceError) => {
      if (started) reply.raw.end();
      else if (error.code !== 1) sendOpenAiError(reply, error);
      resolve();
    });
    reply.raw.on('close', () => {
      hold.end();
      if (!reply.raw.writableFinished) stream.cancel();
    });
  });
}
