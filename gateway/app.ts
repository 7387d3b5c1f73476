// The gateway: a stateless Fastify translator from HTTP onto the core's gRPC services.
// build() returns the app; server.ts listens.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { CoreClients } from './core-client.js';
import { boundaryOptions, installBoundary, invalid } from './boundary.js';
import { installTracing } from './tracing.js';
import { fromGrpcError } from './errors.js';
import websocket from '@fastify/websocket';
import cors from '@fastify/cors';
import { AuthFailures } from './auth-failures.js';
import { agentRoutes } from './routes/agents.js';
import { contractRoutes } from './routes/contracts.js';
import { engineRoutes } from './routes/engine.js';
import { decisionRoutes } from './routes/decision.js';
import { workflowRoutes } from './routes/workflows.js';
import { metricsRoutes, observeRequest } from './metrics.js';
import { healthRoutes } from './routes/health.js';
import { imRoutes } from './routes/im.js';
import { llmRoutes } from './routes/llm.js';
import { observerRoutes } from './routes/observer.js';
import { runRoutes } from './routes/runs.js';
import { sessionRoutes } from './routes/sessions.js';
import { toolRoutes } from './routes/tools.js';

export interface GatewayOptions {
  core: CoreClients;
  logger: Logger;
  /** Browser origins allowed by CORS and on the IM WebSocket; none by default. */
  corsOrigins?: readonly string[];
  /** Failed authentications one client address may make a minute before it gets 429. */
  authFailuresPerMinute?: number;
  /** Reverse proxies whose X-Forwarded-For names the client (addresses or CIDRs). */
  trustedProxies?: readonly string[];
  /** Serve HTTPS (and WSS) with this certificate and key. */
  https?: { cert: Buffer; key: Buffer };
  readyTimeoutMs?: number;
  bodyLimit?: number;
  wsPingIntervalMs?: number;
}

/** Routes that need no credential: probes, and the IM socket (its hello carries the key). */
const ANONYMOUS_ROUTES = new Set(['/health', '/ready', '/v1/im']);
/** SSE routes, where a browser's stream token may come as `?access_token=`. */
const STREAM_ROUTES = new Set(['/v1/runs/:run_id/events/stream']);

export function buildGateway(opts: GatewayOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: opts.logger as FastifyBaseLogger,
    ...(opts.https && { https: opts.https }),
    // The client's address, for the limits: the socket's, or the one a trusted proxy forwarded.
    ...(opts.trustedProxies?.length && { trustProxy: [...opts.trustedProxies] }),
    bodyLimit: opts.bodyLimit ?? 4 * 1024 * 1024,
    requestIdHeader: 'x-request-id',
    // One access line per request (onResponse below), not fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => `req_${crypto.randomUUID()}`,
    ajv: { customOptions: { allErrors: false, removeAdditional: false, coerceTypes: 'array' } },
    ...boundaryOptions,
  });
  installBoundary(app);
  installTracing(app);
  const origins = opts.corsOrigins ?? [];
  void app.register(cors, { origin: [...origins], credentials: true, maxAge: 600, exposedHeaders: ['x-request-id', 'retry-after'] });
  const failures = new AuthFailures(opts.authFailuresPerMinute ?? 60);

  app.setErrorHandler((error, request, reply) => {
    const e = error as { validation?: unknown; statusCode?: number; code?: unknown; message: string; validationContext?: string; instancePath?: string };
    if (e.validation) {
      const first = (e.validation as { instancePath?: string; params?: { missingProperty?: string; additionalProperty?: string } }[])[0];
      const field = [e.validationContext, (first?.instancePath ?? '').replace(/^\//, '').replaceAll('/', '.'), first?.params?.missingProperty ?? first?.params?.additionalProperty]
        .filter(Boolean)
        .join('.');
      return reply.code(400).send({
        error: { code: 'invalid_request', category: 'VALIDATION', message: e.message, retryable: false, details: { field } },
      });
    }
    if (typeof e.code === 'number') {
      const mapped = fromGrpcError(error);
      if (mapped.body.error.retry_after_seconds) void reply.header('retry-after', String(mapped.body.error.retry_after_seconds));
      return reply.code(mapped.statusCode).send(mapped.body);
    }
    if (typeof (error as { abcField?: unknown }).abcField === 'string') {
      return reply.code(400).send(invalid({ field: (error as unknown as { abcField: string }).abcField, message: e.message }));
    }
    const status = e.statusCode && e.statusCode < 500 ? e.statusCode : 500;
    if (status >= 500) request.log.error({ err: error }, 'request failed');
    return reply.code(status).send({
      error: {
        code: status >= 500 ? 'internal_error' : 'invalid_request',
        category: status >= 500 ? 'INTERNAL' : 'VALIDATION',
        message: status >= 500 ? 'internal error' : e.message,
        retryable: status >= 500,
      },
    });
  });

  // A call without any credential is refused before its input is validated, so
  // a caller learns first that it needs a key. The core still checks the key itself.
  app.addHook('onRequest', async (request, reply) => {
    // A flood of bad credentials from one address is cut off before it reaches the core.
    const wait = failures.blockedFor(request.ip);
    if (wait > 0) {
      void reply.header('retry-after', String(wait));
      return reply.code(429).send({ error: { code: 'rate_limited', category: 'AUTH', message: `too many failed authentications from this address; retry after ${wait} s`, retryable: true, retry_after_seconds: wait } });
    }
    const route = request.routeOptions.url;
    if (route === undefined || ANONYMOUS_ROUTES.has(route) || request.method === 'OPTIONS') return;
    if (request.headers.authorization || request.headers['x-api-key']) return;
    if (STREAM_ROUTES.has(route) && /[?&]access_token=/.test(request.url)) return;
    return reply.code(401).send({ error: { code: 'unauthenticated', category: 'AUTH', message: 'a valid API key is required', retryable: false } });
  });

  // One line and one observation per request, when its response closes: an
  // answer, a stream that ended (hijacked replies included) or a client that
  // left (`aborted`, an info line like any other).
  app.addHook('onRequest', async (request, reply) => {
    reply.raw.once('close', () => {
      // A WebSocket took the connection over (101): the IM route logs the socket's end.
      const upgraded = request.headers.upgrade !== undefined && !reply.raw.headersSent;
      const status = upgraded ? 101 : reply.statusCode;
      if (status === 401) failures.record(request.ip);
      observeRequest(request.routeOptions.url, request.method, status, reply.elapsedTime / 1000);
      if (upgraded) return;
      const aborted = !reply.raw.writableFinished;
      request.log.info({ method: request.method, url: request.url, status, ms: Math.round(reply.elapsedTime * 100) / 100, ...(aborted && { aborted }) }, 'request');
    });
  });

  healthRoutes(app, opts.core, opts.readyTimeoutMs ?? 2000);
  agentRoutes(app, opts.core);
  runRoutes(app, opts.core);
  sessionRoutes(app, opts.core);
  toolRoutes(app, opts.core);
  observerRoutes(app, opts.core);
  contractRoutes(app, opts.core);
  engineRoutes(app, opts.core);
  decisionRoutes(app, opts.core);
  workflowRoutes(app, opts.core);
  metricsRoutes(app, opts.core);
  void app.register(async (scope) => llmRoutes(scope, opts.core));
  void app.register(async (scope) => {
    await scope.register(websocket, { options: { maxPayload: 1024 * 1024 } });
    imRoutes(scope, opts.core, opts.wsPingIntervalMs ?? 30_000, { origins, failures });
  });
  return app;
}
