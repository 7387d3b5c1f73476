// The execution engine over HTTP (seed 002): human feedback for a waiting
// execution, its trace and context, and memory search.
import type { FastifyInstance } from 'fastify';
import type { HumanAction } from '../../gen/abc/ingress/v1/ingress.js';
import type { MemoryScope } from '../../gen/abc/observer/v1/engine.js';
import type { CoreClients } from '../core-client.js';
import { call } from '../grpc-call.js';
import { plainEnum } from '../mappers.js';
import { ticketParams } from './contracts.js';

const feedbackBody = {
  type: 'object',
  required: ['action'],
  additionalProperties: false,
  properties: {
    action: { enum: ['continue', 'replan', 'reject'] },
    feedback: { type: 'string', maxLength: 10_000 },
    data: { type: 'object' },
  },
} as const;

export function engineRoutes(app: FastifyInstance, core: CoreClients): void {
  app.post<{ Params: { ticket: string }; Body: { action: 'continue' | 'replan' | 'reject'; feedback?: string; data?: Record<string, unknown> } }>(
    '/v1/tickets/:ticket(^[^:/]+)::feedback',
    { schema: { params: ticketParams, body: feedbackBody } },
    async (req) => {
      const res = await call(
        core.ingress.submitHumanFeedback.bind(core.ingress),
        { ticket: req.params.ticket, action: `HUMAN_ACTION_${req.body.action.toUpperCase()}` as HumanAction, feedback: req.body.feedback ?? '', data: req.body.data },
        req,
      );
      return { ticket: res.ticket, status: plainEnum(res.status, 'TICKET_STATUS'), lifecycle_state: res.lifecycleState };
    },
  );

  app.get<{ Params: { ticket: string }; Querystring: { types?: string } }>(
    '/v1/tickets/:ticket/trace',
    { schema: { params: ticketParams, querystring: { type: 'object', additionalProperties: false, properties: { types: { type: 'string', maxLength: 1000 } } } } },
    async (req) => {
      const types = (req.query.types ?? '').split(',').map((t) => t.trim()).filter(Boolean);
      const res = await call(core.observer.getTrace.bind(core.observer), { ticket: req.params.ticket, types }, req);
      return { ticket: res.ticket, trace_id: res.traceId, events: res.events.map((e) => ({ seq: e.seq, ts: e.ts, type: e.type, payload: e.payload ?? null })) };
    },
  );

  app.get<{ Params: { ticket: string } }>('/v1/tickets/:ticket/context', { schema: { params: ticketParams } }, async (req) => {
    const res = await call(core.observer.getExecutionContext.bind(core.observer), { ticket: req.params.ticket }, req);
    return {
      global_state: res.globalState ?? null,
      execution_context: res.executionContext ?? null,
      snapshots: res.snapshots.map((s) => ({ snapshot_id: s.snapshotId, lifecycle_state: s.lifecycleState, label: s.label, created_at: s.createdAt })),
      human_request: res.humanRequest ?? null,
    };
  });

  app.get<{ Querystring: { scope: 'EPHEMERAL' | 'SESSION' | 'GLOBAL'; q: string; scope_id?: string; limit?: number } }>(
    '/v1/memory/search',
    {
      schema: {
        querystring: {
          type: 'object',
          required: ['scope', 'q'],
          additionalProperties: false,
          properties: { scope: { enum: ['EPHEMERAL', 'SESSION', 'GLOBAL'] }, q: { type: 'string', minLength: 1, maxLength: 500 }, scope_id: { type: 'string', maxLength: 128 }, limit: { type: 'integer', minimum: 1, maximum: 100 } },
        },
      },
    },
    async (req) => {
      const res = await call(
        core.observer.searchMemory.bind(core.observer),
        { scope: `MEMORY_SCOPE_${req.query.scope}` as MemoryScope, scopeId: req.query.scope_id ?? '', query: req.query.q, limit: req.query.limit ?? 20 },
        req,
      );
      return { entries: res.entries.map((e) => ({ scope: plainEnum(e.scope, 'MEMORY_SCOPE'), scope_id: e.scopeId, key: e.key, value: e.value ?? null, tags: e.tags, created_at: e.createdAt, rank: e.rank })) };
    },
  );
}
