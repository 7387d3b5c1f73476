// The gateway's Prometheus metrics (prom-client): requests by route, method
// and status, their duration, and the process. GET /metrics serves them with
// the core's (ObserverService.GetMetrics), for an operator key.
import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { CoreClients } from './core-client.js';
import { call } from './grpc-call.js';

const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'abc_gateway_' });
const registers = [registry];
const requests = new Counter({ name: 'abc_http_requests_total', help: 'HTTP requests the gateway answered, by route, method and status', labelNames: ['route', 'method', 'status'], registers });
const duration = new Histogram({
  name: 'abc_http_request_duration_seconds',
  help: 'Duration of HTTP requests (a stream: until it ends), by route and method',
  labelNames: ['route', 'method'],
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers,
});

/** Client streams the gateway has stopped taking from the core, because their client is not reading (gateway/hold.ts). */
export const pausedStreams = new Gauge({ name: 'abc_gateway_paused_streams', help: 'Streams held for a client that stopped reading, by surface (im: the IM WebSocket, sse: run event streams, llm: LLM proxy streams)', labelNames: ['surface'], registers });
for (const surface of ['im', 'sse', 'llm']) pausedStreams.set({ surface }, 0);

/** Records one answered request; the route is its template (`/v1/runs/{run_id}`), never its ids. */
export function observeRequest(route: string | undefined, method: string, status: number, seconds: number): void {
  const labels = { route: route ? routeTemplate(route) : 'unmatched', method };
  requests.inc({ ...labels, status: String(status) });
  duration.observe(labels, seconds);
}

export function metricsRoutes(app: FastifyInstance, core: CoreClients): void {
  app.get('/metrics', async (req, reply) => {
    // The core checks the operator scope; its refusal is the answer.
    const fromCore = await call(core.observer.getMetrics.bind(core.observer), {}, req);
    return reply.type(registry.contentType).send(`${await registry.metrics()}\n${fromCore.text}`);
  });
}

/** A Fastify route as the docs write it: `/v1/tools/:name(^[^:]+)::invoke` is `/v1/tools/{name}:invoke`. */
export function routeTemplate(url: string): string {
  let template = templates.get(url);
  if (template === undefined) {
    template = url.replace(/\([^)]*\)/g, '').replaceAll('::', '\u0000').replace(/:(\w+)/g, '{$1}').replaceAll('\u0000', ':');
    templates.set(url, template);
  }
  return template;
}

/** One entry per registered route. */
const templates = new Map<string, string>();
