// Every request has a trace id: the caller's W3C `traceparent` trace id, or a
// new one. Error bodies carry it (as trace_id), so does every line the request
// logs, and the core gets it (x-abc-trace-id) for its own errors and log lines.
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    traceId: string;
  }
}

const TRACEPARENT = /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}$/;

export function installTracing(app: FastifyInstance): void {
  app.decorateRequest('traceId', '');
  app.addHook('onRequest', async (request) => {
    const header = request.headers.traceparent;
    const match = typeof header === 'string' ? TRACEPARENT.exec(header) : null;
    request.traceId = match && !/^0+$/.test(match[1]!) ? match[1]! : randomBytes(16).toString('hex');
    // Every line logged while the request runs names its trace.
    request.log = request.log.child({ trace_id: request.traceId });
  });
  // An error body without a trace id gets the request's.
  app.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode < 400 || typeof payload !== 'string' || !payload.startsWith('{"error":{') || payload.includes('"trace_id"')) return payload;
    try {
      const body = JSON.parse(payload) as { error: Record<string, unknown> };
      if (typeof body.error?.code !== 'string' || typeof body.error.category !== 'string') return payload;
      body.error.trace_id = request.traceId;
      return JSON.stringify(body);
    } catch {
      return payload;
    }
  });
}
