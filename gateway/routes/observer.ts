// The observer's HTTP views (seed 004 v2), read-only.
import type { FastifyInstance } from 'fastify';
import type { ExecutionConsequenceView, ExecutionSnapshot, StateMachineTopology, TransitionRecord } from '../../gen/abc/observer/v1/views.js';
import type { CoreClients } from '../core-client.js';
import { call } from '../grpc-call.js';
import { plainEnum } from '../mappers.js';

const topologyJson = (t: StateMachineTopology) => ({
  machine: t.machine,
  nodes: t.nodes.map((n) => ({ status: n.status, is_terminal: n.isTerminal, is_initial: n.isInitial, is_stable: n.isStable, is_resumable: n.isResumable })),
  edges: t.edges.map((e) => ({ from_status: e.fromStatus, to_status: e.toStatus, trigger: e.trigger, allowed_actors: e.allowedActors })),
  forbidden_transitions: t.forbiddenTransitions.map((f) => ({ from: f.fromStatus, to: f.toStatus, reason: f.reason })),
  terminal_statuses: t.terminalStatuses,
  resumable_statuses: t.resumableStatuses,
  initial_status: t.initialStatus,
});

const status = (s: string) => plainEnum(s, 'EXECUTION_STATUS').toLowerCase();
const nullable = <T>(v: T | undefined) => (v === undefined ? null : v);

const snapshotJson = (s: ExecutionSnapshot) => ({
  execution_id: s.executionId,
  action_type: s.actionType,
  action_summary: s.actionSummary,
  current_status: status(s.currentStatus),
  entered_at: s.enteredAt,
  duration_in_state_ms: s.durationInStateMs,
  is_terminal: s.isTerminal,
  is_stable: s.isStable,
  is_resumable: s.isResumable,
  has_side_effects: s.hasSideEffects,
  irreversible: s.irreversible,
  idempotency_key: nullable(s.idempotencyKey),
  timeout_seconds: nullable(s.timeoutSeconds),
  result: nullable(s.result),
  error_message: nullable(s.errorMessage),
  transition_count: s.transitionCount,
  last_actor: nullable(s.lastActor),
  last_trigger: nullable(s.lastTrigger),
  session_id: s.sessionId,
  run_id: s.runId || null,
  created_at: s.createdAt,
});

const transitionJson = (t: TransitionRecord) => ({
  execution_id: t.executionId,
  sequence_number: t.sequenceNumber,
  from_status: status(t.fromStatus),
  to_status: status(t.toStatus),
  trigger: t.trigger,
  actor: t.actor,
  actor_category: t.actorCategory,
  timestamp: t.timestamp,
  is_terminal_transition: t.isTerminalTransition,
});

const consequenceJson = (v: ExecutionConsequenceView) => ({
  execution_id: v.executionId,
  action_type: v.actionType,
  action_summary: v.actionSummary,
  consequence_label: v.consequenceLabel,
  result: nullable(v.result),
  error_message: nullable(v.errorMessage),
  has_side_effects: v.hasSideEffects,
  was_suspended: v.wasSuspended,
  is_still_pending: v.isStillPending,
  total_duration_ms: nullable(v.totalDurationMs),
});

const idParams = (name: string) => ({ type: 'object', required: [name], properties: { [name]: { type: 'string', minLength: 1, maxLength: 128 } } }) as const;

const sinceQuery = (extra: Record<string, unknown> = {}) =>
  ({ type: 'object', additionalProperties: false, properties: { since_ts: { type: 'integer', minimum: 0 }, ...extra } }) as const;

export function observerRoutes(app: FastifyInstance, core: CoreClients): void {
  // A browser's read-only credential for one run's or session's event stream.
  app.post<{ Body: { run_id?: string; session_id?: string; ttl_seconds?: number } }>(
    '/v1/stream_tokens',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          properties: { run_id: { type: 'string', maxLength: 64 }, session_id: { type: 'string', maxLength: 64 }, ttl_seconds: { type: 'integer', minimum: 1, maximum: 3600 } },
        },
      },
    },
    async (req) => {
      const b = req.body ?? {};
      const out = await call(core.observer.createStreamToken.bind(core.observer), { runId: b.run_id ?? '', sessionId: b.session_id ?? '', ttlSeconds: b.ttl_seconds ?? 0 }, req);
      return { token: out.token, expires_at: out.expiresAt, ...(b.run_id && { stream_url: `/v1/runs/${encodeURIComponent(b.run_id)}/events/stream?access_token=${out.token}` }) };
    },
  );
  app.get<{ Querystring: { since_ts?: number; agent_id?: string } }>(
    '/v1/metrics/runs',
    { schema: { querystring: sinceQuery({ agent_id: { type: 'string', maxLength: 64 } }) } },
    async (req) => {
      const { metrics: m } = await call(core.observer.getRunMetrics.bind(core.observer), { sinceTs: req.query.since_ts ?? 0, agentId: req.query.agent_id ?? '' }, req);
      return {
        total: m!.total, succeeded: m!.succeeded, failed: m!.failed, cancelled: m!.cancelled,
        success_rate: m!.successRate, p50_duration_ms: m!.p50DurationMs, p95_duration_ms: m!.p95DurationMs,
      };
    },
  );

  app.get<{ Querystring: { since_ts?: number } }>('/v1/metrics/tools', { schema: { querystring: sinceQuery() } }, async (req) => {
    const res = await call(core.observer.getToolMetrics.bind(core.observer), { sinceTs: req.query.since_ts ?? 0 }, req);
    return {
      tools: res.tools.map((t) => ({
        tool_name: t.toolName, total: t.total, succeeded: t.succeeded, failed: t.failed,
        success_rate: t.successRate, p95_duration_ms: t.p95DurationMs, p95_approval_wait_ms: t.p95ApprovalWaitMs,
      })),
    };
  });

  app.get<{ Params: { session_id: string } }>('/api/execution/:session_id/timeline', { schema: { params: idParams('session_id') } }, async (req) => {
    const { timeline: t } = await call(core.observer.getTimeline.bind(core.observer), { sessionId: req.params.session_id }, req);
    return {
      session_id: t!.sessionId,
      contracts: t!.contracts.map(snapshotJson),
      transitions: t!.transitions.map(transitionJson),
      total_contracts: t!.totalContracts,
      terminal_contracts: t!.terminalContracts,
      active_contracts: t!.activeContracts,
      has_suspended: t!.hasSuspended,
      has_irreversible_completed: t!.hasIrreversibleCompleted,
      started_at: nullable(t!.startedAt),
      ended_at: nullable(t!.endedAt),
    };
  });

  app.get<{ Params: { execution_id: string } }>('/api/execution/:execution_id/snapshot', { schema: { params: idParams('execution_id') } }, async (req) => {
    const { snapshot } = await call(core.observer.getSnapshot.bind(core.observer), { executionId: req.params.execution_id }, req);
    return snapshotJson(snapshot!);
  });

  app.get<{ Params: { session_id: string } }>('/api/execution/:session_id/consequences', { schema: { params: idParams('session_id') } }, async (req) => {
    const res = await call(core.observer.getConsequenceViews.bind(core.observer), { sessionId: req.params.session_id, runId: '' }, req);
    return { views: res.views.map(consequenceJson), prompt_text: res.promptText };
  });

  app.get<{ Params: { run_id: string } }>('/v1/runs/:run_id/consequences', { schema: { params: idParams('run_id') } }, async (req) => {
    const res = await call(core.observer.getConsequenceViews.bind(core.observer), { sessionId: '', runId: req.params.run_id }, req);
    return { views: res.views.map(consequenceJson), prompt_text: res.promptText };
  });

  app.get<{ Querystring: { machine?: string } }>(
    '/api/execution/topology',
    { schema: { querystring: { type: 'object', additionalProperties: false, properties: { machine: { type: 'string', maxLength: 200 } } } } },
    async (req) => {
      const res = await call(core.observer.getTopology.bind(core.observer), { machine: req.query.machine ?? '' }, req);
      return { machines: res.machines.map(topologyJson) };
    },
  );
}
