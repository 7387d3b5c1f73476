// The only writer of run state. Every transition goes through the run machine's
// table and commits in one transaction with its events.
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError } from '../domain/errors.js';
import { isIllegalTransition, writeTransition, type MachineTable } from './transition.js';
import { RUN_MACHINE, type RunState, type RunTrigger } from '../domain/run.machine.js';
import type { Logger } from '../runtime/log.js';
import { moveContract } from './execution-contracts.js';
import type { ExecutionTrigger } from '../domain/execution-contract.machine.js';
import { RUN_ENDED_CHANNEL } from './event-bus.js';
import { appendEvents, type NewEvent, type StoredEvent } from './event-log.js';

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
  userId: string | null;
}

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
  user_id: string | null;
}

const COLUMNS = 'run_id, session_id, root_agent_id, parent_run_id, status, started_at, ended_at, error, request_id, trace_id, user_id';

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
  userId: r.user_id,
});

export interface NewRun {
  runId: string;
  sessionId: string;
  agentId: string;
  parentRunId?: string;
  requestId?: string;
  traceId: string;
  tokenHash: string;
  userId?: string;
}

export async function insertRun(tx: EntityManager, run: NewRun): Promise<void> {
  await tx.execute(
    `INSERT INTO runs (run_id, session_id, root_agent_id, parent_run_id, status, request_id, trace_id, token_hash, user_id)
     VALUES (?, ?, ?, ?, 'CREATED', ?, ?, ?, ?)`,
    [run.runId, run.sessionId, run.agentId, run.parentRunId ?? null, run.requestId ?? null, run.traceId, run.tokenHash, run.userId ?? null],
  );
}

export async function findRun(em: EntityManager, runId: string): Promise<RunRow | null> {
  const [row] = await em.execute<RawRun[]>(`SELECT ${COLUMNS} FROM runs WHERE run_id = ?`, [runId]);
  return row ? toRun(row) : null;
}

export async function findRunByRequest(em: EntityManager, sessionId: string, requestId: string): Promise<RunRow | null> {
  const [row] = await em.execute<RawRun[]>(`SELECT ${COLUMNS} FROM runs WHERE session_id = ? AND request_id = ?`, [sessionId, requestId]);
  return row ? toRun(row) : null;
}

export async function findRunByTokenHash(em: EntityManager, tokenHash: string): Promise<RunRow | null> {
  const [row] = await em.execute<RawRun[]>(`SELECT ${COLUMNS} FROM runs WHERE token_hash = ?`, [tokenHash]);
  return row ? toRun(row) : null;
}

export interface Transitioned {
  from: RunState;
  to: RunState;
  events: StoredEvent[];
}

/**
 * Applies `trigger` to a run under a row lock, records `error` when given,
 * and appends `events`, all in transaction `tx`. An illegal transition is
 * logged and thrown as FAILED_PRECONDITION `illegal_transition`.
 */
export async function transitionRun(
  tx: EntityManager,
  log: Logger,
  runId: string,
  trigger: RunTrigger,
  events: NewEvent[],
  error?: Record<string, unknown>,
): Promise<Transitioned> {
  let moved;
  try {
    // An ended run NOTIFYs at commit: every process forgets its token (it dies with its run).
    moved = await writeTransition(tx, RUNS, trigger, {
      where: 'run_id = ?',
      params: [runId],
      set: ({ to }) => ({
        sql: ['ended_at = CASE WHEN ? THEN now() ELSE ended_at END', 'error = COALESCE(?::jsonb, error)', 'version = version + 1'],
        params: [RUN_MACHINE.isTerminal(to), error ? JSON.stringify(error) : null],
      }),
      notifyOnEnd: { channel: RUN_ENDED_CHANNEL, payload: 'run_id' },
    });
  } catch (e) {
    if (isIllegalTransition(e)) log.warn({ runId, trigger }, 'illegal run transition rejected');
    throw e;
  }
  if (!moved) throw new AbcError('NOT_FOUND', { code: 'not_found', message: `run ${runId} not found` });
  const row = { status: moved.from, parent_run_id: moved.row.parent_run_id as string | null };
  const next = { value: moved.to };
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
  return { from: row.status, to: next.value, events: await appendEvents(tx, runId, [...events, ...mirrored]) };
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
