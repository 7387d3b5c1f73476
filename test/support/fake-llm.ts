// A real HTTP server speaking the OpenAI wire format: streams, stalls, fails, cuts.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface LlmRequest {
  raw: Buffer;
  json: Record<string, any>;
  headers: http.IncomingHttpHeaders;
  closed: Promise<void>;
}

export type LlmBehaviour = (req: LlmRequest, res: ServerResponse) => void | Promise<void>;

export interface FakeLlm {
  url: string;
  requests: LlmRequest[];
  behave(b: LlmBehaviour): void;
  close(): Promise<void>;
}

export function completion(model: string, content = 'Hello world') {
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 1704067200,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop', logprobs: null }],
    usage: { prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 },
  };
}

export function chunk(model: string, delta: Record<string, unknown>, finish: string | null = null) {
  return { id: 'chatcmpl-test', object: 'chat.completion.chunk', created: 1704067200, model, choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] };
}

/** Streams `deltas` as chunks, the usage chunk when asked for, then [DONE]. */
export function streamChunks(req: LlmRequest, res: ServerResponse, deltas: Record<string, unknown>[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'x-request-id': 'up-req-1' });
  for (const [i, d] of deltas.entries()) res.write(`data: ${JSON.stringify(chunk(req.json.model, d, i === deltas.length - 1 ? 'stop' : null))}\n\n`);
  if (req.json.stream_options?.include_usage) {
    res.write(`data: ${JSON.stringify({ id: 'chatcmpl-test', object: 'chat.completion.chunk', created: 1704067200, model: req.json.model, choices: [], usage: { prompt_tokens: 7, completion_tokens: deltas.length, total_tokens: 7 + deltas.length } })}\n\n`);
  }
  res.end('data: [DONE]\n\n');
}

/** The default: a two-word answer, streamed when asked. */
export const answer: LlmBehaviour = (req, res) => {
  if (req.json.stream) return streamChunks(req, res, [{ role: 'assistant', content: 'Hello' }, { content: ' world' }]);
  res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'up-req-1', 'openai-processing-ms': '5' });
  res.end(JSON.stringify(completion(req.json.model)));
};

export async function startFakeLlm(behaviour: LlmBehaviour = answer): Promise<FakeLlm> {
  let current = behaviour;
  const requests: LlmRequest[] = [];
  const server = http.createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET' && req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ object: 'list', data: [{ id: 'gpt-4', object: 'model', created: 0, owned_by: 'test' }] }));
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return res.writeHead(404).end();
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const request: LlmRequest = { raw, json: JSON.parse(raw.toString()), headers: req.headers, closed: new Promise((r) => res.on('close', () => r())) };
    requests.push(request);
    try {
      await current(request, res);
    } catch {
      res.destroy();
    }
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    behave: (b) => (current = b),
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
