// GET /health (liveness) and GET /ready (the core answers SERVING, so migrations are applied).
import { Metadata } from '@grpc/grpc-js';
import type { FastifyInstance } from 'fastify';
import { HealthCheckResponse_ServingStatus } from '../../gen/grpc/health/v1/health.js';
import type { CoreClients } from '../core-client.js';

const statusSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['status'],
  properties: { status: { type: 'string' }, reason: { type: 'string' } },
} as const;

export function healthRoutes(app: FastifyInstance, core: CoreClients, readyTimeoutMs: number): void {
  app.get('/health', { schema: { response: { 200: statusSchema } } }, async () => ({ status: 'ok' }));

  app.get('/ready', { schema: { response: { 200: statusSchema, 503: statusSchema } } }, async (_req, reply) => {
    try {
      const res = await new Promise<{ status: HealthCheckResponse_ServingStatus }>((resolve, reject) =>
        core.health.check({ service: '' }, new Metadata(), { deadline: Date.now() + readyTimeoutMs }, (error, response) =>
          error ? reject(error) : resolve(response),
        ),
      );
      if (res.status === HealthCheckResponse_ServingStatus.SERVING) return { status: 'ready' };
      return reply.code(503).send({ status: 'not_ready', reason: 'core is not serving: database unreachable, migrations pending, or shutting down' });
    } catch {
      return reply.code(503).send({ status: 'not_ready', reason: 'core is unreachable' });
    }
  });
}
