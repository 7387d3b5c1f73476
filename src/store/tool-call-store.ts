// The tool_calls, approvals and idempotency_keys tables: their rows, their
// reads and inserts, and their machines' bindings for the one transition
// writer (store/transition.ts). The use cases are orchestrator/tool-calls.ts.
import { metrics } from '../runtime/metrics.js';
import { context as otel, contextInTrace, startSpan, trace } from '../runtime/tracing.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { APPROVAL_MACHINE, type ApprovalState, type ApprovalTrigger } from '../domain/approval.machine.js';
import type { RunState } from '../domain/run.machine.js';
import { TOOL_CALL_MACHINE, type ToolCallState, type ToolCallTrigger } from '../domain/tool-call.machine.js';
import { numberedEvents, type Numbered, type SentEvent, type StoredEvent } from './event-log.js';
import { executeGuarded, executeOne, inJsonList } from './native.js';
import { writeTransition, type MachineTable } from './transition.js';

export const TOOL_CALLS: MachineTable<ToolCallState, ToolCallTrigger> = { machine: TOOL_CALL_MACHINE, table: 'tool_calls', state: 'status', key: ['tool_call_id'] };
export const APPROVALS: MachineTable<ApprovalState, ApprovalTrigger> = { machine: APPROVAL_MACHINE, table: 'approvals', state: 'status', key: ['approval_id'] };

export interface ToolCallRow {
  toolCallId: string;
  runId: string;
  toolName: string;
  kind: string;
  status: ToolCallState;
  args: Record<string, unknown>;
  result: unknown;
  error: { code: string; message: string } | null;
  approvalId: string | null;
  idempotencyKey: string | null;
  createdAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
  deadlineAt: Date | null;
  timeoutMs: number | null;
}

export interface RawCall {
  tool_call_id: string;
  run_id: string;
  tool_name: string;
  kind: string;
  status: ToolCallState;
  args: Record<string, unknown> | null;
  result: unknown;
  error: { code: string; message: string } | null;
  approval_id: string | null;
  idempotency_key: string | null;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  deadline_at: Date | null;
  timeout_ms: number | null;
}

const date = (d: Date | null) => (d ? new Date(d) : null);
export const toCall = (r: RawCall): ToolCallRow => ({
  toolCallId: r.tool_call_id,
  runId: r.run_id,
  toolName: r.tool_name,
  kind: r.kind,
  status: r.status,
  args: r.args ?? {},
  result: r.result,
  error: r.error,
  approvalId: r.approval_id,
  idempotencyKey: r.idempotency_key,
  createdAt: new Date(r.created_at),
  startedAt: date(r.started_at),
  completedAt: date(r.completed_at),
  deadlineAt: date(r.deadline_at),
  timeoutMs: r.timeout_ms,
});

export interface ApprovalRow {
  approvalId: string;
  /** An agent's tool call: its run and call; null for a contract step. */
  runId: string | null;
  toolCallId: string | null;
  /** A contract's plan step: its ticket and step; null for a tool call. */
  ticket: string | null;
  stepId: string | null;
  sessionId: string;
  status: ApprovalState;
  createdAt: Date;
  decidedAt: Date | null;
  decidedBy: string | null;
  reason: string | null;
  expiresAt: Date;
  argsSummary: string | null;
  toolName: string;
  tenantId: string;
  /** The run's user; a contract step has none. */
  userId: string | null;
}

interface RawApproval {
  approval_id: string;
  run_id: string | null;
  tool_call_id: string | null;
  ticket: string | null;
  step_id: string | null;
  session_id: string;
  status: ApprovalState;
  created_at: Date;
  decided_at: Date | null;
  decided_by: string | null;
  reason: string | null;
  expires_at: Date;
  args_summary: string | null;
  args_hash: string | null;
  tool_name: string;
  tenant_id: string;
  user_id: string | null;
  call_args?: Record<string, unknown> | null;
  session_user_id?: string | null;
  run_status?: RunState | null;
  run_trace_id?: string | null;
  run_parent?: string | null;
}

/** What a decision checks of an approval, read with it: its call's arguments as they are now, its session's user and its run's state. */
export interface ApprovalForDecision {
  /** Null when it has no call. */
  callArgs: Record<string, unknown> | null;
  /** Null when its session is gone. */
  sessionUserId: string | null;
  /** Null when its run is gone. */
  run: { runId: string; status: RunState; traceId: string; parentRunId: string | null } | null;
}

const APPROVAL_COLUMNS = `a.approval_id, a.run_id, a.tool_call_id, a.ticket, a.step_id, a.session_id, a.status, a.created_at, a.decided_at, a.decided_by,
  a.reason, a.expires_at, a.args_summary, a.args_hash, coalesce(c.tool_name, a.capability) AS tool_name, a.tenant_id, r.user_id`;
const APPROVAL_FROM = 'FROM approvals a LEFT JOIN tool_calls c ON c.tool_call_id = a.tool_call_id LEFT JOIN runs r ON r.run_id = a.run_id';
const APPROVAL_SELECT = `SELECT ${APPROVAL_COLUMNS} ${APPROVAL_FROM}`;

const toApproval = (r: RawApproval): ApprovalRow => ({
  approvalId: r.approval_id,
  runId: r.run_id,
  toolCallId: r.tool_call_id,
  ticket: r.ticket,
  stepId: r.step_id,
  sessionId: r.session_id,
  status: r.status,
  createdAt: new Date(r.created_at),
  decidedAt: date(r.decided_at),
  decidedBy: r.decided_by,
  reason: r.reason,
  expiresAt: new Date(r.expires_at),
  argsSummary: r.args_summary,
  toolName: r.tool_name,
  tenantId: r.tenant_id,
  userId: r.user_id,
});

/** Claims an idempotency key for `scope`; false when a live claim exists (read it with readIdempotencyKey). An expired key is claimed afresh. */
export async function claimIdempotencyKey(tx: EntityManager, scope: string, key: string, hash: string, ttlMs: number): Promise<boolean> {
  const [claimed] = await tx.execute<{ key: string }[]>(
    `INSERT INTO idempotency_keys (scope, key, request_hash, expires_at) VALUES (?, ?, ?, now() + (? * interval '1 millisecond'))
     ON CONFLICT (scope, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, response = NULL, created_at = now(), expires_at = EXCLUDED.expires_at
     WHERE idempotency_keys.expires_at <= now()
     RETURNING key`,
    [scope, key, hash, ttlMs],
  );
  return Boolean(claimed);
}

/**
 * Deletes up to `limit` keys past their expiry, which a claim would take afresh
 * anyway; says how many went. A key a claim has just found live is locked by
 * it (SKIP LOCKED), so its reader still finds it.
 */
export async function deleteExpiredIdempotencyKeys(em: EntityManager, limit = 1000): Promise<number> {
  const [row] = await em.execute<{ n: number }[]>(
    `WITH gone AS (
       DELETE FROM idempotency_keys k USING (
         SELECT scope, key FROM idempotency_keys WHERE expires_at < now() ORDER BY expires_at LIMIT ? FOR UPDATE SKIP LOCKED) old
       WHERE k.scope = old.scope AND k.key = old.key RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    [limit],
  );
  return row!.n;
}

export async function readIdempotencyKey<T>(tx: EntityManager, scope: string, key: string): Promise<{ request_hash: string; response: T } | undefined> {
  const [row] = await tx.execute<{ request_hash: string; response: T }[]>('SELECT request_hash, response FROM idempotency_keys WHERE scope = ? AND key = ?', [scope, key]);
  return row;
}

/** A new call, CREATED, in the statement that answers its idempotency key (claimed by claimIdempotencyKey) with the call's id. */
export async function insertToolCall(
  tx: EntityManager,
  c: { toolCallId: string; runId: string; toolName: string; kind: string; args: Record<string, unknown>; idempotencyKey: string; timeoutMs: number; traceparent?: string },
): Promise<void> {
  await tx.execute(
    `WITH answered AS (UPDATE idempotency_keys SET response = jsonb_build_object('tool_call_id', ?::text) WHERE scope = 'tool_call' AND key = ?)
     INSERT INTO tool_calls (tool_call_id, run_id, tool_name, kind, status, args, idempotency_key, timeout_ms, traceparent)
     VALUES (?, ?, ?, ?, 'CREATED', ?::jsonb, ?, ?, ?)`,
    [c.toolCallId, c.idempotencyKey, c.toolCallId, c.runId, c.toolName, c.kind, JSON.stringify(c.args), c.idempotencyKey, c.timeoutMs, c.traceparent ?? null],
  );
}

/** A call as one of its commits wrote it, with the events that commit appended. */
export interface CallCommit {
  call: ToolCallRow;
  events: StoredEvent[];
}

/** What a decision writes of an approval's row (its timestamps as a row or as JSON gives them). */
export interface DecidedRow {
  approval_id: string;
  status: ApprovalState;
  created_at: Date | string;
  decided_at: Date | string | null;
  decided_by: string | null;
  reason: string | null;
}

/** What abc_decide_call wrote: the approval's decision and the call with its events. */
export interface CallDecided extends CallCommit {
  approval: DecidedRow;
}

/**
 * A decision on a held call's approval in one statement (abc_decide_call,
 * migration decide_call_function); undefined, with nothing written, when a
 * row was not as the decision was decided from (SQLSTATE ABC01).
 */
export async function decideCall(em: EntityManager, arg: Record<string, unknown>, origin: string): Promise<CallDecided | undefined> {
  const json = JSON.stringify(arg);
  type Row = { r: { approval: CallDecided['approval']; call: RawCall; session_id: string; numbered: Numbered[] } };
  const rows = await executeGuarded<Row>(em, 'SELECT abc_decide_call(?::jsonb, ?) AS r', [json, origin]);
  if (!rows) return undefined;
  const { approval, call, session_id, numbered } = rows[0]!.r;
  // The events in the order sent; a resume's, last, only when it was written.
  const sent = JSON.parse(json) as Record<'approval_events' | 'events' | 'resume_events', SentEvent[]>;
  return { approval, call: toCall(call), events: numberedEvents([...sent.approval_events, ...sent.events, ...sent.resume_events], session_id, numbered) };
}

/** The columns a call's row maps. */
const CALL_COLUMNS = 'tool_call_id, run_id, tool_name, kind, status, args, result, error, approval_id, idempotency_key, created_at, started_at, completed_at, deadline_at, timeout_ms';

export async function readToolCall(em: EntityManager, toolCallId: string): Promise<ToolCallRow | undefined> {
  const [row] = await executeOne<RawCall>(em, `SELECT ${CALL_COLUMNS} FROM tool_calls WHERE tool_call_id = ?`, [toolCallId]);
  return row && toCall(row);
}

/** Locks a call and reads who owns its session, in which tenant. */
export async function lockCallWithOwner(tx: EntityManager, toolCallId: string): Promise<(RawCall & { session_id: string; owner: string; tenant_id: string }) | undefined> {
  const [row] = await tx.execute<(RawCall & { session_id: string; owner: string; tenant_id: string })[]>(
    `SELECT c.*, r.session_id, s.user_id AS owner, r.tenant_id FROM tool_calls c JOIN runs r ON r.run_id = c.run_id JOIN sessions s ON s.session_id = r.session_id
     WHERE c.tool_call_id = ? FOR UPDATE OF c`,
    [toolCallId],
  );
  return row;
}

interface CallAndRun {
  status: ToolCallState;
  kind: string;
  runId: string;
  runStatus: RunState;
  tenantId: string;
  sessionId: string;
  traceId: string;
  traceparent: string | null;
  /** Another completed irreversible contract of the same session with this call's idempotency key, if any. */
  doneElsewhere: string | null;
}

/** A call's state with its run's, and whether its action already completed elsewhere, read together. */
export async function readCallAndRun(em: EntityManager, toolCallId: string): Promise<CallAndRun | undefined> {
  const [row] = await executeOne<CallAndRun>(
    em,
    `SELECT c.status, c.kind, c.run_id AS "runId", r.status AS "runStatus", r.tenant_id AS "tenantId", r.session_id AS "sessionId", r.trace_id AS "traceId", c.traceparent,
            (SELECT o.execution_id FROM execution_contracts k
               JOIN execution_contracts o ON o.idempotency_key = k.idempotency_key AND o.session_id = k.session_id AND o.execution_id <> k.execution_id
              WHERE k.run_id = c.run_id AND k.subject_id = c.tool_call_id AND o.status = 'completed' AND o.irreversible LIMIT 1) AS "doneElsewhere"
       FROM tool_calls c JOIN runs r ON r.run_id = c.run_id WHERE c.tool_call_id = ?`,
    [toolCallId],
  );
  return row;
}

/**
 * A run's state, with what it still waits on: its calls awaiting approval or
 * running on a client (`calls`), and its execution contracts still waiting
 * (`contracts`). Undefined for no such run.
 */
export async function runWaits(tx: EntityManager, runId: string, clientKinds: string[]): Promise<{ status: RunState; calls: number; contracts: number } | undefined> {
  const [row] = await tx.execute<{ status: RunState; calls: number; contracts: number }[]>(
    `SELECT r.status,
            (SELECT count(*)::int FROM tool_calls WHERE run_id = r.run_id AND (status = 'WAITING_APPROVAL' OR (status = 'RUNNING' AND ${inJsonList('kind')}))) AS calls,
            (SELECT count(*)::int FROM execution_contracts WHERE run_id = r.run_id AND status = 'waiting') AS contracts
       FROM runs r WHERE r.run_id = ?`,
    [JSON.stringify(clientKinds), runId],
  );
  return row;
}

export async function insertApproval(
  tx: EntityManager,
  a: { approvalId: string; runId: string; toolCallId: string; sessionId: string; tenantId: string; summary: string; argsHash: string; timeoutMs: number },
): Promise<{ expires_at: Date }> {
  const [row] = await tx.execute<{ expires_at: Date }[]>(
    `INSERT INTO approvals (approval_id, run_id, tool_call_id, status, expires_at, session_id, tenant_id, args_summary, args_hash)
     VALUES (?, ?, ?, 'PENDING', now() + (? * interval '1 millisecond'), ?, ?, ?, ?) RETURNING expires_at`,
    [a.approvalId, a.runId, a.toolCallId, a.timeoutMs, a.sessionId, a.tenantId, a.summary, a.argsHash],
  );
  return row!;
}

/** An approval a contract's plan step waits on; the engine's deadline, not the sweeper, times it out. */
export async function insertStepApproval(
  tx: EntityManager,
  a: { approvalId: string; ticket: string; stepId: string; capability: string; sessionId: string; tenantId: string; summary: string; argsHash: string; expiresAt: Date },
): Promise<void> {
  await tx.execute(
    `INSERT INTO approvals (approval_id, ticket, step_id, capability, status, expires_at, session_id, tenant_id, args_summary, args_hash)
     VALUES (?, ?, ?, ?, 'PENDING', ?, ?, ?, ?, ?)`,
    [a.approvalId, a.ticket, a.stepId, a.capability, a.expiresAt, a.sessionId, a.tenantId, a.summary, a.argsHash],
  );
}

/** Settles a contract step's approval as its ticket's human request was answered, timed out or withdrawn. */
export async function settleStepApproval(tx: EntityManager, approvalId: string, trigger: ApprovalTrigger, decidedBy: string, reason: string, traceId: string): Promise<void> {
  const moved = await writeTransition<ApprovalState, ApprovalTrigger, Pick<DecidedRow, 'approval_id' | 'created_at'>>(tx, APPROVALS, trigger, {
    columns: 'approval_id, status, created_at',
    where: "approval_id = ? AND status = 'PENDING'",
    params: [approvalId],
    set: () => ({ sql: ['decided_at = now()', 'decided_by = ?', 'reason = ?', 'version = version + 1'], params: [decidedBy, reason || null] }),
  });
  if (moved) observeApproval(moved.row, moved.to, traceId, decidedBy);
}

/**
 * Counts how long an approval waited, by how it ended, and records the wait
 * as a span in the trace of its run or ticket, linked to the decider's.
 */
export function observeApproval(row: Pick<DecidedRow, 'approval_id' | 'created_at'>, to: string, traceId: string, decidedBy: string): void {
  const requested = new Date(row.created_at);
  metrics.approvalWait.observe({ outcome: to.toLowerCase() }, (Date.now() - requested.getTime()) / 1000);
  const decider = trace.getSpanContext(otel.active());
  const { span } = startSpan('approval', {
    startTime: requested,
    attributes: { 'abc.approval.id': String(row.approval_id), 'abc.approval.outcome': to, 'abc.approval.decided_by': decidedBy },
    ...(decider && decider.traceId !== traceId && { links: [{ context: decider }] }),
  }, contextInTrace(traceId));
  span.end();
}

/** The pending approval of a ticket's step, locked; undefined when there is none. */
export async function lockStepApproval(tx: EntityManager, ticket: string): Promise<(ApprovalRow & { argsHash: string | null }) | undefined> {
  const [row] = await tx.execute<RawApproval[]>(`${APPROVAL_SELECT} WHERE a.ticket = ? AND a.status = 'PENDING' FOR UPDATE OF a`, [ticket]);
  return row && { ...toApproval(row), argsHash: row.args_hash };
}

/**
 * An approval with its tool's name; `lock` takes its row (only its row),
 * `pendingOnly` (with lock) skips it unless PENDING and free, `decision` reads
 * what a decision checks (ApprovalForDecision).
 */
export async function readApproval(
  em: EntityManager,
  approvalId: string,
  o: { lock?: boolean; pendingOnly?: boolean; decision?: boolean } = {},
): Promise<(ApprovalRow & { argsHash: string | null; decision?: ApprovalForDecision }) | undefined> {
  const lock = o.pendingOnly ? " AND a.status = 'PENDING' FOR UPDATE OF a SKIP LOCKED" : o.lock ? ' FOR UPDATE OF a' : '';
  // A call's arguments as its row maps them (none stored: {}); null when it has no call.
  const select = o.decision
    ? `SELECT ${APPROVAL_COLUMNS}, CASE WHEN c.tool_call_id IS NOT NULL THEN coalesce(c.args, '{}') END AS call_args,
         (SELECT s.user_id FROM sessions s WHERE s.session_id = a.session_id) AS session_user_id, r.status AS run_status, r.trace_id AS run_trace_id,
         r.parent_run_id AS run_parent ${APPROVAL_FROM}`
    : APPROVAL_SELECT;
  const [row] = await executeOne<RawApproval>(em, `${select} WHERE a.approval_id = ?${lock}`, [approvalId]);
  return row && { ...toApproval(row), argsHash: row.args_hash, ...(o.decision && { decision: decisionOf(row) }) };
}

const decisionOf = (row: RawApproval): ApprovalForDecision => ({
  callArgs: row.call_args ?? null,
  sessionUserId: row.session_user_id ?? null,
  run: row.run_id && row.run_status ? { runId: row.run_id, status: row.run_status, traceId: row.run_trace_id ?? '', parentRunId: row.run_parent ?? null } : null,
});

/** A place in a list of approvals, oldest first: after this creation time (epoch microseconds) and id. */
export interface ApprovalKey {
  createdUs: string;
  approvalId: string;
}

/** A page of a tenant's approvals, narrowed by session, run, status and the users a key speaks for; oldest first. */
export async function listApprovals(
  em: EntityManager,
  tenantId: string,
  filter: { sessionId?: string; runId?: string; ticket?: string; status?: ApprovalState; userIds?: readonly string[] | null },
  page: { after?: ApprovalKey; limit: number },
): Promise<{ approvals: ApprovalRow[]; hasMore: boolean; last?: ApprovalKey }> {
  const where: string[] = ['a.tenant_id = ?'];
  const params: unknown[] = [tenantId];
  if (filter.userIds) where.push('r.user_id IN (SELECT jsonb_array_elements_text(?::jsonb))'), params.push(JSON.stringify(filter.userIds));
  if (filter.sessionId) where.push('a.session_id = ?'), params.push(filter.sessionId);
  if (filter.runId) where.push('a.run_id = ?'), params.push(filter.runId);
  if (filter.ticket) where.push('a.ticket = ?'), params.push(filter.ticket);
  if (filter.status) where.push('a.status = ?'), params.push(filter.status);
  if (page.after) where.push("(a.created_at, a.approval_id) > (timestamptz 'epoch' + ?::bigint * interval '1 microsecond', ?)"), params.push(page.after.createdUs, page.after.approvalId);
  const rows = await em.execute<(RawApproval & { created_us: string })[]>(
    `SELECT ${APPROVAL_COLUMNS}, (extract(epoch FROM a.created_at) * 1000000)::bigint::text AS created_us ${APPROVAL_FROM}
     WHERE ${where.join(' AND ')} ORDER BY a.created_at, a.approval_id LIMIT ?`,
    [...params, page.limit + 1],
  );
  const shown = rows.slice(0, page.limit);
  const last = shown.at(-1);
  return { approvals: shown.map(toApproval), hasMore: rows.length > page.limit, ...(last && { last: { createdUs: last.created_us, approvalId: last.approval_id } }) };
}

export async function expiredApprovals(em: EntityManager): Promise<string[]> {
  const rows = await em.execute<{ approval_id: string }[]>("SELECT approval_id FROM approvals WHERE status = 'PENDING' AND expires_at < now() AND ticket IS NULL ORDER BY expires_at LIMIT 50");
  return rows.map((r) => r.approval_id);
}

/** Running or dispatched calls past their deadline, from the open calls' index (ended calls are not in it). */
export async function overdueCalls(em: EntityManager): Promise<string[]> {
  const rows = await em.execute<{ tool_call_id: string }[]>("SELECT tool_call_id FROM tool_calls WHERE status IN ('DISPATCHED', 'RUNNING') AND deadline_at < now() ORDER BY deadline_at LIMIT 50");
  return rows.map((r) => r.tool_call_id);
}

/** Locks a call still past its deadline (SKIP LOCKED: one core times it out). */
export async function lockOverdueCall(tx: EntityManager, toolCallId: string): Promise<boolean> {
  const [row] = await tx.execute<{ status: ToolCallState }[]>(
    "SELECT status FROM tool_calls WHERE tool_call_id = ? AND status IN ('DISPATCHED', 'RUNNING') AND deadline_at < now() FOR UPDATE SKIP LOCKED",
    [toolCallId],
  );
  return Boolean(row);
}

/** Calls whose executor died before starting them: approved ones, and server-side calls left DISPATCHED (from the open calls' index). */
export async function orphanCalls(em: EntityManager, clientKinds: string[]): Promise<string[]> {
  const rows = await em.execute<{ tool_call_id: string }[]>(
    `SELECT c.tool_call_id FROM tool_calls c LEFT JOIN approvals a ON a.approval_id = c.approval_id
     WHERE (c.status = 'APPROVED' AND a.decided_at < now() - interval '2 seconds')
        OR (c.status = 'DISPATCHED' AND c.kind NOT IN (SELECT jsonb_array_elements_text(?::jsonb)) AND c.created_at < now() - interval '2 seconds')
     LIMIT 50`,
    [JSON.stringify(clientKinds)],
  );
  return rows.map((r) => r.tool_call_id);
}
