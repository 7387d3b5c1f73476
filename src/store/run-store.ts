// The only writer of run state. Every transition goes through the run machine's
// table and commits in one transaction with its events.
import { metrics } from '../runtime/metrics.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError } from '../domain/errors.js';
import { storedError } from '../domain/stored-error.js';
import { isIllegalTransition, writeTransition, type MachineTable } from './transition.js';
import { RUN_MACHINE, type RunState, type RunTrigger } from '../domain/run.machine.js';
import type { Logger } from '../runtime/log.js';
import { moveContract } from './execution-contracts.js';
import type { ExecutionTrigger } from '../domain/execution-contract.machine.js';
import { CANCEL_CHANNEL, RUN_ENDED_CHANNEL } from './event-bus.js';
import { appendArgs, appendEvents, channelFor, numberedEvents, type NewEvent, type Numbered, type SentEvent, type StoredEvent } from './event-log.js';
import { transition } from '../domain/machine.js';
import { newId } from '../runtime/new-id.js';
import { executeGuarded, executeOne } from './native.js';
import { toMessage, type MessageRow, type RawMessage } from './session-store.js';

export interface RunRow {
  runId: string;
  sessionId: string;
  rootAgentId: string;
  parentRunId: string | null;
  status: RunState;
  startedAt: Date;
  endedAt: Date | null;
  error: Record<string, unknown> | null;
  requestId: string | null;
  traceId: string;
  /** The traceparent of the span that started it, for work done for it later. */
  traceparent: string | null;
  userId: string | null;
  tenantId: string;
}

/** What never changes about a run once it exists: where it belongs and whose it is. */
export type RunFacts = Pick<RunRow, 'runId' | 'sessionId' | 'rootAgentId' | 'parentRunId' | 'traceId' | 'userId' | 'tenantId'>;

interface RawRun {
  run_id: string;
  session_id: string;
  root_agent_id: string;
  parent_run_id: string | null;
  status: RunState;
  started_at: Date;
  ended_at: Date | null;
  error: Record<string, unknown> | null;
  request_id: string | null;
  trace_id: string;
  traceparent: string | null;
  user_id: string | null;
  tenant_id: string;
}

const COLUMNS = 'run_id, session_id, root_agent_id, parent_run_id, status, started_at, ended_at, error, request_id, trace_id, traceparent, user_id, tenant_id';

const toRun = (r: RawRun): RunRow => ({
  runId: r.run_id,
  sessionId: r.session_id,
  rootAgentId: r.root_agent_id,
  parentRunId: r.parent_run_id,
  status: r.status,
  startedAt: new Date(r.started_at),
  endedAt: r.ended_at ? new Date(r.ended_at) : null,
  error: r.error,
  requestId: r.request_id,
  traceId: r.trace_id,
  traceparent: r.traceparent,
  userId: r.user_id,
  tenantId: r.tenant_id,
});

export interface NewRun {
  runId: string;
  sessionId: string;
  agentId: string;
  parentRunId?: string;
  requestId?: string;
  traceId: string;
  traceparent?: string;
  tokenHash: string;
  userId?: string;
  tenantId: string;
  /** The core that executes it, and for how long its lease holds. */
  lease: { owner: string; ms: number };
}

export async function insertRun(tx: EntityManager, run: NewRun): Promise<void> {
  await tx.execute(
    `INSERT INTO runs (run_id, session_id, root_agent_id, parent_run_id, status, request_id, trace_id, traceparent, token_hash, user_id, tenant_id, lease_owner, lease_until)
     VALUES (?, ?, ?, ?, 'CREATED', ?, ?, ?, ?, ?, ?, ?, now() + (? * interval '1 millisecond'))`,
    [run.runId, run.sessionId, run.agentId, run.parentRunId ?? null, run.requestId ?? null, run.traceId, run.traceparent ?? null, run.tokenHash, run.userId ?? null, run.tenantId, run.lease.owner, run.lease.ms],
  );
}

export async function findRun(em: EntityManager, runId: string): Promise<RunRow | null> {
  const [row] = await executeOne<RawRun>(em, `SELECT ${COLUMNS} FROM runs WHERE run_id = ?`, [runId]);
  return row ? toRun(row) : null;
}

export async function findRunByRequest(em: EntityManager, sessionId: string, requestId: string): Promise<RunRow | null> {
  const [row] = await executeOne<RawRun>(em, `SELECT ${COLUMNS} FROM runs WHERE session_id = ? AND request_id = ?`, [sessionId, requestId]);
  return row ? toRun(row) : null;
}

export async function findRunByTokenHash(em: EntityManager, tokenHash: string): Promise<RunRow | null> {
  const [row] = await executeOne<RawRun>(em, `SELECT ${COLUMNS} FROM runs WHERE token_hash = ?`, [tokenHash]);
  return row ? toRun(row) : null;
}

export interface Transitioned {
  from: RunState;
  to: RunState;
  events: StoredEvent[];
  /** The run as the move wrote it. */
  run: RunRow;
}

/**
 * Applies `trigger` to a run under a row lock, records `error` when given,
 * and appends `events`, all in transaction `tx`. An illegal transition is
 * logged and thrown as FAILED_PRECONDITION `illegal_transition`.
 */
export async function transitionRun(tx: EntityManager, log: Logger, runId: string, trigger: RunTrigger, events: NewEvent[], error?: Record<string, unknown>): Promise<Transitioned> {
  return (await moveRun(tx, log, runId, trigger, events, error))!;
}

/** transitionRun for a run in `from` only: undefined, with nothing written or appended, for a run in another state (one statement, no locking read). */
export function transitionRunFrom(tx: EntityManager, log: Logger, runId: string, from: RunState, trigger: RunTrigger, events: NewEvent[]): Promise<Transitioned | undefined> {
  return moveRun(tx, log, runId, trigger, events, undefined, from);
}

async function moveRun(tx: EntityManager, log: Logger, runId: string, trigger: RunTrigger, events: NewEvent[], error?: Record<string, unknown>, onlyFrom?: RunState): Promise<Transitioned | undefined> {
  let moved;
  try {
    // An ended run NOTIFYs at commit: every process forgets its token (it dies with its run).
    moved = await writeTransition<RunState, RunTrigger, RawRun>(tx, RUNS, trigger, {
      columns: 'run_id, status, parent_run_id, started_at',
      where: 'run_id = ?',
      params: [runId],
      set: ({ to }) => ({
        sql: ['ended_at = CASE WHEN ? THEN now() ELSE ended_at END', 'error = COALESCE(?::jsonb, error)', 'version = version + 1'],
        // Stored in the one error shape (domain/stored-error.ts).
        params: [RUN_MACHINE.isTerminal(to), error ? JSON.stringify(storedError(error)) : null],
      }),
      notifyOnEnd: { channel: RUN_ENDED_CHANNEL, payload: 'run_id' },
      returning: true,
      oneStatement: true,
      ...(onlyFrom && { onlyFrom }),
    });
  } catch (e) {
    if (isIllegalTransition(e)) log.warn({ runId, trigger }, 'illegal run transition rejected');
    throw e;
  }
  if (!moved && onlyFrom) return undefined;
  if (!moved) throw new AbcError('NOT_FOUND', { code: 'not_found', message: `run ${runId} not found` });
  const row = { status: moved.from, parent_run_id: moved.row.parent_run_id };
  const next = { value: moved.to };
  countMove(trigger, next.value, moved.row.started_at);
  // A child run is its parent's agent_call contract (seed 004). Its execution_state
  // events go to the child's own log: locking the parent here could deadlock with a cancel of the tree.
  const mirrored: NewEvent[] = [];
  for (const move of row.parent_run_id ? (RUN_TO_CONTRACT[trigger] ?? []) : []) {
    const state = await moveContract(tx, { runId: row.parent_run_id!, subjectId: runId }, move, 'graph_runner', {
      ...(next.value === 'DONE' && { result: 'completed' }),
      ...(error && { errorMessage: String(error.message ?? error.code ?? '') }),
    });
    if (state) mirrored.push({ type: 'execution_state', payload: { ...state } });
  }
  return { from: row.status, to: next.value, events: await appendEvents(tx, runId, [...events, ...mirrored]), run: toRun(moved.after!) };
}

function countMove(trigger: RunTrigger, to: RunState, startedAt: Date | string): void {
  if (trigger === 'start') metrics.runsStarted.inc();
  if (!RUN_MACHINE.isTerminal(to)) return;
  metrics.runsFinished.inc({ status: to });
  metrics.runDuration.observe({ status: to }, (Date.now() - new Date(startedAt).getTime()) / 1000);
}

/**
 * Starts a run in one statement (abc_start_run): its session made or found,
 * the run moved by `start`, the user's message and the run's first events.
 * The run, the events appended and the cursor of the first; undefined when nothing was
 * written (the session is another tenant's or user's), for the caller's
 * transactional path to refuse. A run with a parent mirrors its moves on the
 * parent's contract, which this statement does not write: undefined too.
 * `origin` is as for `completeRun`. With `maxLive`, a tenant with that many
 * runs going is refused (`tenantRunsExhausted`) and nothing is written. A
 * statement that opened the session answers its whole transcript: the one
 * message it wrote.
 */
export async function startRun(
  em: EntityManager,
  run: NewRun,
  content: string,
  events: NewEvent[],
  origin = '',
  maxLive = 0,
): Promise<{ run: RunRow; firstId: string; events: StoredEvent[]; transcript?: MessageRow[] } | undefined> {
  const next = transition(RUN_MACHINE, 'CREATED', 'start');
  if (!next.ok || run.parentRunId) return undefined;
  const sent = JSON.stringify(appendArgs([{ runId: run.runId, events, onlyIfActive: false }]).input);
  const arg = {
    run: {
      run_id: run.runId, session_id: run.sessionId, agent_id: run.agentId, status: next.value, hops: 1, request_id: run.requestId ?? null, trace_id: run.traceId,
      traceparent: run.traceparent ?? null, token_hash: run.tokenHash, user_id: run.userId ?? null, tenant_id: run.tenantId, lease_owner: run.lease.owner, lease_ms: run.lease.ms,
    },
    message: { message_id: newId('msg'), content },
    channel: channelFor(origin),
    origin,
    max_live: maxLive,
    live: LIVE,
    numbered: true,
  };
  let started: ({ run: RawRun; transcript: RawMessage[] | null } & Appended) | undefined;
  try {
    started = await oneCall(em, 'abc_start_run', arg, sent);
  } catch (error) {
    if ((error as { code?: string }).code === 'ABC03') throw tenantRunsExhausted(maxLive);
    throw error;
  }
  if (!started) return undefined;
  countMove('start', next.value, started.run.started_at);
  const appended = appendedEvents(sent, started);
  return { run: toRun(started.run), firstId: appended[0]!.id, events: appended, ...(started.transcript && { transcript: started.transcript.map(toMessage) }) };
}

/** A tenant's limit of runs going at once is reached: retry when one ends. */
export function tenantRunsExhausted(max: number): AbcError {
  return new AbcError('RESOURCE_EXHAUSTED', {
    code: 'rate_limited',
    category: 'EXECUTION',
    message: `this tenant has ${max} runs going, its limit; retry when one ends`,
    retryable: true,
    retryAfterSeconds: 1,
    details: { limit: 'tenant_runs', max_runs: max },
  });
}

/**
 * Completes a running run in one statement (abc_complete_run): the move, the
 * assistant's message, the run-ended NOTIFY and the run's last events. The run
 * as written and the events appended; undefined when nothing was written (the
 * run is paused, has ended, or has a parent whose contract mirrors it). With
 * `origin` (an event bus's), the statement notifies no one: that bus's
 * process hands the events to its watchers and announces them and the run's
 * end after the commit (EventBus.deliver), so that completions share WAL
 * flushes; a notifying commit holds PostgreSQL's notification lock through its
 * flush.
 */
export async function completeRun(
  em: EntityManager,
  run: RunRow,
  message: { content: string; metadata?: Record<string, unknown> | null },
  events: NewEvent[],
  origin = '',
): Promise<{ run: RunRow; events: StoredEvent[] } | undefined> {
  const next = transition(RUN_MACHINE, 'RUNNING', 'complete');
  if (!next.ok || run.parentRunId) return undefined;
  const sent = JSON.stringify(appendArgs([{ runId: run.runId, events, onlyIfActive: false }]).input);
  const arg = {
    run_id: run.runId,
    from: 'RUNNING',
    to: next.value,
    message: { message_id: newId('msg'), content: message.content, ...(message.metadata && { metadata: message.metadata }) },
    ended_channel: origin ? null : RUN_ENDED_CHANNEL,
    channel: channelFor(origin),
    origin,
    numbered: true,
  };
  const ended = await oneCall<RawRun & Appended>(em, 'abc_complete_run', arg, sent);
  if (!ended) return undefined;
  countMove('complete', next.value, ended.started_at);
  return { run: toRun(ended), events: appendedEvents(sent, ended) };
}

/** What a run's statement answers of its events when asked for `numbered` (migration numbered_run_events). */
type Appended = { session_id: string; numbered: Numbered[] };

/** The events a run's statement appended: what was sent (`events`, its JSON), numbered as it answered. */
const appendedEvents = (events: string, appended: Appended): StoredEvent[] => numberedEvents(JSON.parse(events) as SentEvent[], appended.session_id, appended.numbered);

/** Calls `fn` with `arg` and its `events` (their JSON, serialised once for the call and the answer). */
async function oneCall<R>(em: EntityManager, fn: 'abc_start_run' | 'abc_complete_run', arg: Record<string, unknown>, events: string): Promise<R | undefined> {
  const sql = `SELECT ${fn}(?::jsonb || jsonb_build_object('events', ?::jsonb)) AS r`;
  return (await executeGuarded<{ r: R }>(em, sql, [JSON.stringify(arg), events]))?.[0]?.r;
}

const RUNS: MachineTable<RunState, RunTrigger> = { machine: RUN_MACHINE, table: 'runs', state: 'status', key: ['run_id'] };

/** Run hops and the agent_call contract moves they mirror. */
const RUN_TO_CONTRACT: Partial<Record<RunTrigger, ExecutionTrigger[]>> = {
  start: ['start'],
  wait_tool: ['suspend'],
  wait_approval: ['suspend'],
  resume: ['resume'],
  complete: ['succeed'],
  fail: ['fail'],
  cancel: ['cancel'],
};

/** Active run states: started and not ended. */
const ACTIVE = RUN_MACHINE.states.filter((s) => s !== 'CREATED' && !RUN_MACHINE.isTerminal(s)).map((s) => `'${s}'`).join(', ');

// A run's events are appended under its row lock, their ids drawn in seq
// order: its first and last by seq are its first and last by id, found in the
// (run_id, seq) index. min(id) and max(id) walked the primary key instead, up
// to the whole table for a young run.
export async function firstEventId(em: EntityManager, runId: string): Promise<string | undefined> {
  const [first] = await em.execute<{ id: string | null }[]>('SELECT id FROM events WHERE run_id = ? ORDER BY seq LIMIT 1', [runId]);
  return first?.id ?? undefined;
}

/** A run and its callers, root first. */
export function ancestorRuns(em: EntityManager, runId: string): Promise<{ run_id: string; root_agent_id: string }[]> {
  return em.execute(
    `WITH RECURSIVE up AS (
       SELECT run_id, root_agent_id, parent_run_id, 1 AS depth FROM runs WHERE run_id = ?
       UNION ALL SELECT r.run_id, r.root_agent_id, r.parent_run_id, up.depth + 1 FROM runs r JOIN up ON r.run_id = up.parent_run_id WHERE up.depth < 100
     ) SELECT run_id, root_agent_id FROM up ORDER BY depth DESC`,
    [runId],
  );
}

/** Tells the core executing `runId` to stop it (delivered at commit). */
export async function notifyRunCancel(tx: EntityManager, runId: string): Promise<void> {
  await tx.execute('SELECT pg_notify(?, ?)', [CANCEL_CHANNEL, runId]);
}

export async function activeChildren(tx: EntityManager, runId: string): Promise<string[]> {
  const rows = await tx.execute<{ run_id: string }[]>(`SELECT run_id FROM runs WHERE parent_run_id = ? AND status IN (${ACTIVE})`, [runId]);
  return rows.map((r) => r.run_id);
}

/** Renews a lease this core holds on an active run; false when the run ended or another core took it. */
export async function renewRunLease(em: EntityManager, runId: string, coreId: string, leaseMs: number): Promise<boolean> {
  const rows = await em.execute<{ run_id: string }[]>(
    `UPDATE runs SET lease_until = now() + (? * interval '1 millisecond')
     WHERE run_id = ? AND lease_owner = ? AND status IN (${ACTIVE}) RETURNING run_id`,
    [leaseMs, runId, coreId],
  );
  return rows.length > 0;
}

/** Detaches a run from its executor (only from `coreId` when given). */
export async function releaseRunLease(em: EntityManager, runId: string, coreId?: string): Promise<void> {
  if (coreId) await em.execute('UPDATE runs SET lease_owner = NULL, lease_until = NULL WHERE run_id = ? AND lease_owner = ?', [runId, coreId]);
  else await em.execute('UPDATE runs SET lease_owner = NULL, lease_until = NULL WHERE run_id = ?', [runId]);
}

export async function setRunTokenHash(em: EntityManager, runId: string, tokenHash: string): Promise<void> {
  await em.execute('UPDATE runs SET token_hash = ? WHERE run_id = ?', [tokenHash, runId]);
}

/** The text a run has already streamed to its clients. */
export async function streamedText(em: EntityManager, runId: string): Promise<string> {
  const rows = await em.execute<{ text: string | null }[]>("SELECT payload->>'text' AS text FROM events WHERE run_id = ? AND type = 'agent_stream_delta' ORDER BY seq", [runId]);
  return rows.map((r) => r.text ?? '').join('');
}

/**
 * What a resumed agent is told (its `context.resume`, besides the reason):
 * the text its clients already have, the cursor of the run's last event, and
 * the tool calls it already made with their outcomes, oldest first.
 */
export async function resumeState(em: EntityManager, runId: string): Promise<{ streamed_text: string; last_cursor: string; tool_calls: Record<string, unknown>[] }> {
  const [text, [last], calls] = await Promise.all([
    streamedText(em, runId),
    em.execute<{ id: string | null }[]>('SELECT id FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT 1', [runId]),
    em.execute<Record<string, unknown>[]>(
      `SELECT tool_call_id, tool_name, args, status, result, error FROM tool_calls WHERE run_id = ? ORDER BY created_at, tool_call_id`,
      [runId],
    ),
  ]);
  return { streamed_text: text, last_cursor: last?.id ?? '0', tool_calls: calls.map((c) => ({ ...c, status: String(c.status).toLowerCase() })) };
}

/** Adds an LLM call's tokens to its run. */
export async function addRunTokens(em: EntityManager, runId: string, tokens: number): Promise<void> {
  await em.execute('UPDATE runs SET tokens_used = tokens_used + ? WHERE run_id = ?', [tokens, runId]);
}

/** The states of a run that is going: every state but the terminal ones. */
const LIVE = RUN_MACHINE.states.filter((s) => !RUN_MACHINE.isTerminal(s));

/** How many runs of a tenant are going (not in a terminal state). */
export async function countLiveRuns(em: EntityManager, tenantId: string): Promise<number> {
  const [row] = await executeOne<{ n: number }>(
    em,
    'SELECT count(*)::int AS n FROM runs WHERE tenant_id = ? AND status IN (SELECT jsonb_array_elements_text(?::jsonb))',
    [tenantId, JSON.stringify(LIVE)],
  );
  return row!.n;
}

/** Locks a run and reads its state. */
export async function lockRunStatus(tx: EntityManager, runId: string): Promise<RunState | undefined> {
  const [row] = await tx.execute<{ status: RunState }[]>('SELECT status FROM runs WHERE run_id = ? FOR UPDATE', [runId]);
  return row?.status;
}

/**
 * Claims up to 20 runs whose executor was lost (lease lapsed), with SKIP
 * LOCKED, skipping the runs this core still executes, and says for each how to
 * recover it.
 */
export async function claimOrphanRuns(em: EntityManager, coreId: string, inFlight: string[], leaseMs: number): Promise<OrphanRun[]> {
  const claimed = await em.execute<{ run_id: string; status: RunState; detached: boolean }[]>(
    `WITH picked AS (
       SELECT run_id, status, lease_owner IS NULL AS detached FROM runs
       WHERE status IN (${ACTIVE}) AND (lease_until < now() OR (status = 'RUNNING' AND lease_owner IS NULL))
         -- Runs this core still executes: their lease lapsed only because the database was away.
         AND NOT (lease_owner = ? AND run_id IN (SELECT jsonb_array_elements_text(?::jsonb)))
       ORDER BY lease_until NULLS FIRST LIMIT 20 FOR UPDATE SKIP LOCKED
     )
     UPDATE runs r SET lease_owner = ?, lease_until = now() + (? * interval '1 millisecond') FROM picked WHERE r.run_id = picked.run_id
     RETURNING r.run_id, picked.status, picked.detached`,
    [coreId, JSON.stringify(inFlight), coreId, leaseMs],
  );
  if (!claimed.length) return [];
  // Read after the claim, not in its statement: a row that another transaction moved while the claim
  // scanned is claimed as it is now, but the claim's own subqueries would see the log as it was before
  // (a resume's run_state missing, say, and a paused run taken for one lost mid-stream).
  const flags = await em.execute<{ run_id: string; streamed: boolean; after_pause: boolean; done_early: boolean }[]>(
    `SELECT r.run_id,
       EXISTS (SELECT 1 FROM events e WHERE e.run_id = r.run_id AND e.type IN ('agent_stream_delta', 'agent_state')) AS streamed,
       coalesce((SELECT e.payload->>'from' FROM events e WHERE e.run_id = r.run_id AND e.type = 'run_state' ORDER BY e.seq DESC LIMIT 1) LIKE 'PAUSED%', false) AS after_pause,
       coalesce((SELECT e.type FROM events e WHERE e.run_id = r.run_id AND e.type IN ('agent_invoke_started', 'agent_invoke_retry', 'agent_done_while_paused')
                 ORDER BY e.seq DESC LIMIT 1) = 'agent_done_while_paused', false) AS done_early
     FROM (SELECT jsonb_array_elements_text(?::jsonb) AS run_id) r`,
    [JSON.stringify(claimed.map((c) => c.run_id))],
  );
  const byId = new Map(flags.map((f) => [f.run_id, f]));
  return claimed.map((c) => ({ ...c, ...byId.get(c.run_id)! }));
}

/** A run claimed by the recovery sweep, and what its log says of how it stopped. */
export interface OrphanRun {
  run_id: string;
  status: RunState;
  /** It had no executor when claimed (a paused run released by an earlier sweep). */
  detached: boolean;
  /** Its agent had streamed output. */
  streamed: boolean;
  /** Its last run_state left a pause: it had resumed. */
  after_pause: boolean;
  /** Its agent said done while it waited. */
  done_early: boolean;
}
