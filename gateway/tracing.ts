// Every request has a span and a trace: the caller's W3C `traceparent`, or a
// new trace. Error bodies carry its id (as trace_id), so does every line the
// request logs, and the core continues it (the span's traceparent).
// The process's tracer provider is installed by whoever starts the gateway
// (src/main); without one, spans are no-ops and only trace ids flow.
import { randomBytes } from 'node:crypto';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Span } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { routeTemplate } from './metrics.js';

declare module 'fastify' {
  interface FastifyRequest {
    traceId: string;
    /** The request's span, under the caller's traceparent. */
    traceContext: Context | null;
  }
}

const spans = new WeakMap<FastifyRequest, Span>();
const w3c = new W3CTraceContextPropagator();
const tracer = trace.getTracer('abc-gateway');

export function installTracing(app: FastifyInstance): void {
  app.decorateRequest('traceId', '');
  app.decorateRequest('traceContext', null);
  app.addHook('onRequest', async (request, reply) => {
    const header = request.headers.traceparent;
    const route = request.routeOptions.url && routeTemplate(request.routeOptions.url);
    const parent = typeof header === 'string' ? w3c.extract(ROOT_CONTEXT, { traceparent: header }, { get: (c, k) => c[k as 'traceparent'], keys: () => ['traceparent'] }) : ROOT_CONTEXT;
    const span = tracer.startSpan(route ? `${request.method} ${route}` : request.method, {
      kind: SpanKind.SERVER,
      attributes: {
        'http.request.method': request.method,
        'url.path': request.url.split('?')[0]!,
        'url.scheme': request.protocol,
        ...(route && { 'http.route': route }),
        ...(typeof request.headers['user-agent'] === 'string' && { 'user_agent.original': request.headers['user-agent'] }),
      },
    }, parent);
    const context = trace.setSpan(parent, span);
    spans.set(request, span);
    // A stream (a hijacked reply) ends when its response closes, like any answer; a client that left is `aborted`.
    reply.raw.once('close', () => endSpan(request, reply.raw.writableFinished ? reply.statusCode : undefined));
    request.traceContext = context;
    const spanContext = span.spanContext();
    request.traceId = trace.isSpanContextValid(spanContext) ? spanContext.traceId : randomBytes(16).toString('hex');
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

/** Ends a request's span (a WebSocket's when its upgrade is done): by its status, or as aborted. */
export function endSpan(request: FastifyRequest, statusCode: number | undefined): void {
  const span = spans.get(request);
  if (!span) return;
  spans.delete(request);
  if (statusCode === undefined) span.setAttribute('http.request.aborted', true);
  else {
    span.setAttribute('http.response.status_code', statusCode);
    if (statusCode >= 500) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: `HTTP ${statusCode}` });
      span.setAttribute('error.type', String(statusCode));
    }
  }
  span.end();
}

/** The traceparent the core continues: the request's span's, else (no tracer installed) one in the request's trace. */
export function traceparentOf(request: FastifyRequest): string {
  const carrier: Record<string, string> = {};
  if (request.traceContext) w3c.inject(request.traceContext, carrier, { set: (c, k, v) => void (c[k] = v) });
  return carrier.traceparent ?? `00-${request.traceId}-${randomBytes(8).toString('hex')}-00`;
}
