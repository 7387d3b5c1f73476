// The observer plane: read-only projections. Event reads run in read-only transactions.
import { ObserverServiceService } from '../../gen/abc/observer/v1/observer.js';
import { requireKey, requireRun, requireSession, speaksFor, tenantOf } from '../access/principal.js';
import { invalidRequest, notFound, pageLimit } from '../domain/errors.js';
import type pg from 'pg';
import { PROMPT_ACTION_TYPES } from './consequences.js';
import { readContract, readContracts } from '../store/execution-reads.js';
import { toConsequenceMessage, toSnapshotMessage, toTransitionMessage } from './mappers.js';
import { consequenceViews, renderConsequences, snapshot, timeline } from '../domain/execution-views.js';
import type { ServiceHandlers } from '../grpc/bind.js';
import { runMetrics, toolMetrics } from '../store/metrics-reads.js';
import { enumOf, toEventMessage } from '../grpc/mappers.js';
import type { MemoryScope as MemoryScopeMessage } from '../../gen/abc/observer/v1/engine.js';
import { MEMORY_SCOPES, type MemoryScope } from '../domain/engine-types.js';
import { readExecutionContext, readTrace, searchMemory } from '../store/engine-reads.js';
import type { EventBus } from '../store/event-bus.js';
import { readEvents, type EventFilter } from '../store/event-log.js';
import type { Orm } from '../store/orm.js';
import { watchEvents } from '../store/event-watch.js';
import { TOPOLOGY } from '../domain/machine-catalog.js';
import { registry } from '../runtime/metrics.js';
import type { StateMachineTopology } from '../domain/topology.js';
import { RUN_MACHINE } from '../domain/run.machine.js';
import { findRun } from '../store/run-store.js';
import { streamTarget, type StreamTokens } from '../access/stream-tokens.js';
import { getSession } from '../store/session-store.js';
import type { Principal } from '../access/principal.js';
import { targetTenant } from '../access/scopes.js';

const MAX_PAGE = 1000;


export function observerHandlers(
  orm: Orm,
  bus: EventBus,
  readOnly: pg.Pool,
  streamTokens: StreamTokens,
  /** The phase machines of the workflows a tenant sees (seed 003), beside ABC's own machines. */
  workflowTopology: (tenantId: string) => Promise<StateMachineTopology[]> = async () => [],
): ServiceHandlers<typeof ObserverServiceService> {
  const em = () => orm.em.fork();

  /** Checks the filter and that the caller may see it. */
  async function authorize(principal: Principal | null, runId: string, sessionId: string): Promise<EventFilter> {
    if (!runId && !sessionId) throw invalidRequest('run_id or session_id is required', 'run_id');
    if (runId) {
      const run = await findRun(em(), runId);
      // A run token reads the runs of its session; a key those of its tenant (and users).
      if (principal?.kind === 'run') {
        requireSession(principal, null, run?.sessionId ?? `(run ${runId})`);
        if (!run) throw notFound('run', runId);
      } else requireRun(principal, run, runId);
      return { runId };
    }
    const session = await getSession(em(), sessionId);
    // A session only contracts have (a ticket's) has no row; its reads are filtered by tenant.
    if (session || principal?.kind === 'run') requireSession(principal, session, sessionId);
    return { sessionId };
  }

  /**
   * Whether the caller reads a session's contracts. A session only contracts
   * have (a ticket's) has no row, and reads are filtered by tenant; another
   * tenant's session, or another user's, reads as one with no contracts.
   */
  async function seesContractsOf(principal: Principal | null, sessionId: string): Promise<boolean> {
    if (principal?.kind === 'run') {
      requireSession(principal, null, sessionId);
      return true;
    }
    const session = await getSession(em(), sessionId);
    return !session || (principal?.kind === 'key' && session.tenantId === principal.tenantId && speaksFor(principal, session.userId));
  }

  const cursorOf = (raw: string, field: string) => {
    if (raw && !/^\d{1,19}$/.test(raw)) throw invalidRequest(`${field} must be a cursor from a previous response`, field);
    return raw || '0';
  };

  return {
    /** The state machines, derived from the very tables they run on. */
    async getTopology(req, ctx) {
      const all = [...TOPOLOGY, ...(await workflowTopology(tenantOf(ctx.principal)))];
      const machines = req.machine ? all.filter((t) => t.machine === req.machine) : all;
      if (req.machine && machines.length === 0) {
        throw invalidRequest(`machine must be one of ${all.map((t) => t.machine).join(', ')}`, 'machine');
      }
      return { machines };
    },
    /** The core's Prometheus metrics (operator scope), for the gateway's /metrics. */
    async getMetrics(_req, ctx) {
      // Process-wide figures (tool and model names of every tenant): the operating tenant's operators only.
      targetTenant(requireKey(ctx.principal), true, 'operator');
      return { text: await registry.metrics(), contentType: registry.contentType };
    },
    /** One execution contract, as seed 004's ExecutionSnapshot. */
    async getSnapshot(req, ctx) {
      if (!req.executionId) throw invalidRequest('execution_id is required', 'execution_id');
      const found = await readContract(readOnly, req.executionId);
      if (ctx.principal?.kind === 'run') requireSession(ctx.principal, null, found?.contract.session_id ?? `(execution ${req.executionId})`);
      if (!found || (found.contract as { tenant_id?: string }).tenant_id !== tenantOf(ctx.principal)) throw notFound('execution', req.executionId);
      return { snapshot: toSnapshotMessage(snapshot(found.contract, found.transitions, Date.now())) };
    },
    /** A session's contracts and transitions in order, with its counts and bounds. */
    async getTimeline(req, ctx) {
      if (!req.sessionId) throw invalidRequest('session_id is required', 'session_id');
      const rows = (await seesContractsOf(ctx.principal, req.sessionId)) ? await readContracts(readOnly, tenantOf(ctx.principal), { sessionId: req.sessionId }) : [];
      const view = timeline(req.sessionId, rows.map((r) => r.contract), rows.flatMap((r) => r.transitions), Date.now());
      return {
        timeline: {
          sessionId: view.session_id,
          contracts: view.contracts.map(toSnapshotMessage),
          transitions: view.transitions.map(toTransitionMessage),
          totalContracts: view.total_contracts,
          terminalContracts: view.terminal_contracts,
          activeContracts: view.active_contracts,
          hasSuspended: view.has_suspended,
          hasIrreversibleCompleted: view.has_irreversible_completed,
          startedAt: view.started_at ?? undefined,
          endedAt: view.ended_at ?? undefined,
        },
      };
    },
    /** What happened in the world, for a session or a run, plus its prompt rendering. */
    async getConsequenceViews(req, ctx) {
      if (!req.runId && !req.sessionId) throw invalidRequest('run_id or session_id is required', 'run_id');
      const rows = req.runId
        ? (await authorize(ctx.principal, req.runId, ''), await readContracts(readOnly, tenantOf(ctx.principal), { runId: req.runId }))
        : (await seesContractsOf(ctx.principal, req.sessionId))
          ? await readContracts(readOnly, tenantOf(ctx.principal), { sessionId: req.sessionId })
          : [];
      const views = consequenceViews(rows.map((r) => r.contract), rows.flatMap((r) => r.transitions));
      return { views: views.map(toConsequenceMessage), promptText: renderConsequences(views, PROMPT_ACTION_TYPES) };
    },
    /** Run outcomes and durations since `since_ts`, optionally for one agent. */
    async getRunMetrics(req, ctx) {
      const m = await runMetrics(readOnly, requireKey(ctx.principal).tenantId, req.sinceTs, req.agentId);
      return {
        metrics: { total: m.total, succeeded: m.succeeded, failed: m.failed, cancelled: m.cancelled, successRate: m.success_rate, p50DurationMs: m.p50_duration_ms, p95DurationMs: m.p95_duration_ms },
      };
    },
    /** Per-tool outcomes, durations and approval waits since `since_ts`. */
    async getToolMetrics(req, ctx) {
      const tools = await toolMetrics(readOnly, requireKey(ctx.principal).tenantId, req.sinceTs);
      return {
        tools: tools.map((t) => ({
          toolName: t.tool_name, total: t.total, succeeded: t.succeeded, failed: t.failed, successRate: t.success_rate, p95DurationMs: t.p95_duration_ms, p95ApprovalWaitMs: t.p95_approval_wait_ms,
        })),
      };
    },
    /** An execution's trace in order (seed 002 get_trace). */
    async getTrace(req, ctx) {
      const { tenantId } = requireKey(ctx.principal);
      if (!req.ticket) throw invalidRequest('ticket is required', 'ticket');
      const trace = await readTrace(readOnly, tenantId, req.ticket, req.types.filter(Boolean));
      if (!trace) throw notFound('ticket', req.ticket);
      return { ticket: req.ticket, traceId: trace.trace_id, events: trace.events.map((e) => ({ seq: e.seq, ts: Number(e.ts), type: e.type, payload: e.payload ?? undefined })) };
    },
    /** An execution's GlobalState, ExecutionContext, snapshots and pending human request. */
    async getExecutionContext(req, ctx) {
      const { tenantId } = requireKey(ctx.principal);
      if (!req.ticket) throw invalidRequest('ticket is required', 'ticket');
      const view = await readExecutionContext(readOnly, tenantId, req.ticket);
      if (!view) throw notFound('ticket', req.ticket);
      return {
        globalState: view.global_state,
        executionContext: view.execution_context,
        snapshots: view.snapshots.map((s) => ({ snapshotId: s.snapshot_id, lifecycleState: s.lifecycle_state, label: s.label ?? '', createdAt: s.created_at })),
        humanRequest: view.human_request ?? undefined,
      };
    },
    /** Full-text search of engine memory in one scope. */
    async searchMemory(req, ctx) {
      const { tenantId } = requireKey(ctx.principal);
      const scope = req.scope.replace(/^MEMORY_SCOPE_/, '') as MemoryScope;
      if (!MEMORY_SCOPES.includes(scope)) throw invalidRequest('scope must be EPHEMERAL, SESSION or GLOBAL', 'scope');
      if (scope !== 'GLOBAL' && !req.scopeId) throw invalidRequest(`scope_id is required for ${scope}`, 'scope_id');
      if (!req.query.trim()) throw invalidRequest('query is required', 'query');
      const entries = await searchMemory(readOnly, tenantId, scope, req.scopeId, req.query, pageLimit(req.limit, 20, 100));
      return {
        entries: entries.map((e) => ({ scope: enumOf<MemoryScopeMessage>('MEMORY_SCOPE', e.scope), scopeId: e.scope_id, key: e.key, value: e.value, tags: e.tags, createdAt: e.created_at, rank: e.rank ?? 0 })),
      };
    },
    /** A browser's read-only credential for one run's or session's event stream. */
    async createStreamToken(req, ctx) {
      const principal = requireKey(ctx.principal);
      const target = streamTarget(req.runId, req.sessionId, req.ttlSeconds);
      await authorize(principal, target.runId, target.sessionId);
      const minted = streamTokens.mint(principal, target);
      return { token: minted.token, expiresAt: minted.expiresAt };
    },
    async listEvents(req, ctx) {
      const filter = { ...(await authorize(ctx.principal, req.runId, req.sessionId)), types: req.types.filter(Boolean), excludeTypes: req.excludeTypes.filter(Boolean), afterTs: req.afterTs || undefined };
      const limit = pageLimit(req.limit, 100, MAX_PAGE);
      const rows = await em().transactional((tx) => readEvents(tx, filter, cursorOf(req.cursor, 'cursor'), limit + 1), { readOnly: true });
      const page = rows.slice(0, limit);
      return { events: page.map(toEventMessage), hasMore: rows.length > limit, nextCursor: page.at(-1)?.id ?? req.cursor };
    },
    /** A run's watch ends after its terminal event; a session's watch runs until cancelled. */
    async *watchEvents(req, ctx) {
      const filter = { ...(await authorize(ctx.principal, req.runId, req.sessionId)), types: req.types.filter(Boolean), excludeTypes: req.excludeTypes.filter(Boolean) };
      const finished = req.runId ? async () => RUN_MACHINE.isTerminal((await findRun(em(), req.runId))!.status) : undefined;
      ctx.accept(); // a caught-up watcher learns at once that it is live
      for await (const event of watchEvents(em, bus, { filter, cursor: cursorOf(req.cursor, 'cursor'), signal: ctx.signal, finished })) {
        yield { event: toEventMessage(event) };
      }
    },
  };
}
