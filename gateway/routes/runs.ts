// Runs and their events: read, cancel, replay (seed 001 §9.3) and live SSE.
import type { FastifyInstance } from 'fastify';
import type { CoreClients } from '../core-client.js';
import { call, streamMetadata } from '../grpc-call.js';
import { eventJson, runJson } from '../mappers.js';
import { holdWhileBehind } from '../hold.js';
import { fromGrpcError } from '../errors.js';

const runParams = { type: 'object', required: ['run_id'], properties: { run_id: { type: 'string', minLength: 1, maxLength: 64 } } } as const;
const cursor = { type: 'string', pattern: '^[0-9]{0,19}$' } as const;

const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    after_ts: { type: 'integer', minimum: 0 },
    types: { type: 'string', maxLength: 2000 },
    exclude_types: { type: 'string', maxLength: 2000 },
    limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
    cursor,
  },
} as const;

const splitTypes = (types?: string) => (types ? types.split(',').map((t) => t.trim()).filter(Boolean) : []);

export function runRoutes(app: FastifyInstance, core: CoreClients): void {
  // Open SSE streams end when the gateway closes, so shutdown never waits on a client.
  const live = new Set<{ cancel(): void }>();
  app.addHook('preClose', async () => {
    for (const stream of live) stream.cancel();
  });

  app.get<{ Params: { run_id: string } }>('/v1/runs/:run_id', { schema: { params: runParams } }, async (req) => {
    const res = await call(core.runs.getRun.bind(core.runs), { runId: req.params.run_id }, req);
    return { run: runJson(res.run!) };
  });

  app.post<{ Params: { run_id: string }; Body: { reason?: string } | undefined }>(
    '/v1/runs/:run_id(^[^:]+)::cancel',
    { schema: { params: runParams, body: { type: ['object', 'null'], additionalProperties: false, properties: { reason: { type: 'string', maxLength: 1000 } } } } },
    async (req) => {
      const res = await call(core.runs.cancelRun.bind(core.runs), { runId: req.params.run_id, reason: req.body?.reason ?? '' }, req);
      return { run: runJson(res.run!) };
    },
  );

  app.get<{ Params: { run_id: string }; Querystring: { after_ts?: number; types?: string; exclude_types?: string; limit: number; cursor?: string } }>(
    '/v1/runs/:run_id/events',
    { schema: { params: runParams, querystring: listQuery } },
    async (req) => {
      const q = req.query;
      const res = await call(
        core.observer.listEvents.bind(core.observer),
        { runId: req.params.run_id, sessionId: '', afterTs: q.after_ts ?? 0, types: splitTypes(q.types), excludeTypes: splitTypes(q.exclude_types), limit: q.limit, cursor: q.cursor ?? '' },
        req,
      );
      return { events: res.events.map(eventJson), has_more: res.hasMore, next_cursor: res.nextCursor || null };
    },
  );

  // Live events as SSE. `id:` is the cursor, so a reconnect with Last-Event-ID resumes exactly.
  app.get<{ Params: { run_id: string }; Querystring: { types?: string; exclude_types?: string; cursor?: string; access_token?: string } }>(
    '/v1/runs/:run_id/events/stream',
    {
      schema: {
        params: runParams,
        querystring: { type: 'object', additionalProperties: false, properties: { types: { type: 'string' }, exclude_types: { type: 'string' }, cursor, access_token: { type: 'string', maxLength: 4096 } } },
      },
    },
    (req, reply) => {
      const lastEventId = req.headers['last-event-id'];
      const from = typeof lastEventId === 'string' && /^\d{1,19}$/.test(lastEventId) ? lastEventId : (req.query.cursor ?? '');
      const stream = core.observer.watchEvents(
        { runId: req.params.run_id, sessionId: '', types: splitTypes(req.query.types), excludeTypes: splitTypes(req.query.exclude_types), cursor: from },
        streamMetadata(req, req.query.access_token),
      );
      live.add(stream);
      let opened = false;
      const open = () => {
        if (opened) return;
        opened = true;
        reply.hijack();
        // The headers set so far (CORS) go out with the hijacked response.
        reply.raw.writeHead(200, { ...(reply.getHeaders() as Record<string, string>), 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
        reply.raw.write(': connected\n\n');
      };
      const heartbeat = setInterval(() => opened && reply.raw.write(': ping\n\n'), 15_000);
      stream.on('metadata', open);
      // A client that stops reading holds the core's watcher, not the gateway's memory.
      const hold = holdWhileBehind(stream, reply.raw, () => reply.raw.writableLength, 'sse');
      stream.on('data', (res: { event?: Parameters<typeof eventJson>[0] }) => {
        open();
        const e = eventJson(res.event!);
        reply.raw.write(`id: ${e.cursor}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`);
        hold.check();
      });
      let finished = false;
      stream.on('error', (error: { code?: number }) => {
        finished = true;
        clearInterval(heartbeat);
        live.delete(stream);
        if (error.code === 1) {
          if (opened) reply.raw.end(); // cancelled by us: the client left, or the gateway is closing
          return;
        }
        if (!opened) {
          const mapped = fromGrpcError(error);
          void reply.code(mapped.statusCode).send(mapped.body);
          return;
        }
        reply.raw.write(`event: error\ndata: ${JSON.stringify(fromGrpcError(error).body.error)}\n\n`);
        reply.raw.end();
      });
      stream.on('end', () => {
        if (finished) return;
        finished = true;
        clearInterval(heartbeat);
        live.delete(stream);
        // A stream with nothing to send (a resume after the run's end, a filter
        // that matches nothing) may end before its headers: answer it all the same.
        open();
        reply.raw.end();
      });
      reply.raw.on('close', () => {
        clearInterval(heartbeat);
        hold.end();
        stream.cancel();
      });
    },
  );
}
