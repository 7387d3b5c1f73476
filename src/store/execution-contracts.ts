// The writer of seed 004 execution contracts. Every move goes through the
// execution_contract machine's pure transition(), and its TransitionRecord is
// written in the caller's transaction, with the state change it mirrors.
import type { EntityManager } from '@mikro-orm/postgresql';
import { actorCategory, EXECUTION_CONTRACT_MACHINE, type ExecutionState, type ExecutionTrigger } from '../domain/execution-contract.machine.js';
import { writeTransition, type MachineTable } from './transition.js';
import { newId } from '../runtime/new-id.js';

export interface NewContract {
  sessionId: string;
  runId?: string;
  ticket?: string;
  /** The mirrored entity: a step id, a tool call id, an approval id. */
  subjectId: string;
  actionType: string;
  actionSummary: string;
  irreversible: boolean;
  idempotencyKey?: string;
  timeoutSeconds?: number;
}

/** The seed's `execution_state` event payload. */
export interface ExecutionStateEvent {
  execution_id: string;
  action_summary: string;
  from_status: ExecutionState;
  to_status: ExecutionState;
  trigger: ExecutionTrigger;
  actor_category: string;
  is_terminal: boolean;
  is_resumable: boolean;
  has_side_effects: boolean;
  timestamp: number;
  /** Set when the seed 004 execution_fact of a terminal move could not be written (the move stands). */
  fact_error?: string;
}

let last = 0;
/** Strictly increasing milliseconds, so that moves in one transaction keep their order. */
export function moveTime(): Date {
  last = Math.max(Date.now(), last + 1);
  return new Date(last);
}

export async function openContract(tx: EntityManager, c: NewContract): Promise<string> {
  const [executionId] = await openContracts(tx, [c]);
  return executionId!;
}

/** Opens contracts in one statement; their ids, in order. */
export async function openContracts(tx: EntityManager, contracts: NewContract[]): Promise<string[]> {
  if (!contracts.length) return [];
  const insert = contractsInsert(contracts);
  await tx.execute(insert.sql, insert.params);
  return insert.ids;
}

/** New contracts' INSERT, pending, for a statement that writes them with other records; their ids. */
export function contractsInsert(contracts: NewContract[]): { sql: string; params: unknown[]; ids: string[] } {
  // The node clock, like the transitions: contracts opened in one transaction still order by creation.
  const rows = contracts.map((c) => ({
    execution_id: newId('exe'), session_id: c.sessionId, run_id: c.runId ?? null, ticket: c.ticket ?? null, subject_id: c.subjectId, action_type: c.actionType,
    action_summary: c.actionSummary.slice(0, 500), irreversible: c.irreversible, idempotency_key: c.idempotencyKey ?? null, timeout_seconds: c.timeoutSeconds ?? null, at: moveTime().toISOString(),
  }));
  return {
    sql: `INSERT INTO execution_contracts (execution_id, tenant_id, session_id, run_id, ticket, subject_id, action_type, action_summary, status, irreversible, idempotency_key, timeout_seconds, created_at, entered_at)
          SELECT c.execution_id, COALESCE((SELECT tenant_id FROM runs WHERE run_id = c.run_id), (SELECT tenant_id FROM tickets WHERE ticket = c.ticket), 'default'),
                 c.session_id, c.run_id, c.ticket, c.subject_id, c.action_type, c.action_summary, 'pending', c.irreversible, c.idempotency_key, c.timeout_seconds, c.at, c.at
          FROM jsonb_to_recordset(?::jsonb) AS c(execution_id text, session_id text, run_id text, ticket text, subject_id text, action_type text, action_summary text,
                                                 irreversible boolean, idempotency_key text, timeout_seconds int, at timestamptz)`,
    params: [JSON.stringify(rows)],
    ids: rows.map((r) => r.execution_id),
  };
}

const CONTRACTS: MachineTable<ExecutionState, ExecutionTrigger> = { machine: EXECUTION_CONTRACT_MACHINE, table: 'execution_contracts', state: 'status', key: ['execution_id'] };

/** One hop of a contract: its trigger, and who makes it. */
export interface ContractMove {
  trigger: ExecutionTrigger;
  actor: string;
}

/**
 * Moves the contract mirroring `subjectId` (of a ticket or a run) by `trigger`,
 * records the transition, and returns the `execution_state` event to emit.
 * A subject with no contract (created before contracts were mirrored) is left
 * alone: undefined.
 */
export async function moveContract(
  tx: EntityManager,
  where: { ticket?: string; runId?: string; subjectId: string },
  trigger: ExecutionTrigger,
  actor: string,
  outcome: { result?: string; errorMessage?: string } = {},
): Promise<ExecutionStateEvent | undefined> {
  const [state] = await moveContractThrough(tx, where, [{ trigger, actor }], outcome);
  return state;
}

/**
 * Moves the contract mirroring `subjectId` by each of `moves` in turn, in one
 * write: the machine checks every hop, the row is written once, and each hop
 * gets its transition record. The `execution_state` events, one per hop; none
 * for a subject with no contract. `outcome` is the last hop's.
 */
export async function moveContractThrough(
  tx: EntityManager,
  where: { ticket?: string; runId?: string; subjectId: string },
  moves: readonly ContractMove[],
  outcome: { result?: string; errorMessage?: string } = {},
): Promise<ExecutionStateEvent[]> {
  if (!moves.length) return [];
  const at = moves.map(() => moveTime());
  const moved = await writeTransition<ExecutionState, ExecutionTrigger, { execution_id: string; status: ExecutionState; action_summary: string; irreversible: boolean }>(tx, CONTRACTS, moves.at(-1)!.trigger, {
    through: moves.slice(0, -1).map((m) => m.trigger),
    columns: 'execution_id, status, action_summary, irreversible',
    where: `subject_id = ? AND ${where.ticket ? 'ticket = ?' : 'run_id = ?'}`,
    params: [where.subjectId, where.ticket ?? where.runId],
    order: 'created_at DESC',
    set: () => ({
      sql: ['entered_at = ?', 'result = coalesce(?, result)', 'error_message = coalesce(?, error_message)', 'version = version + ?::int'],
      params: [at.at(-1), outcome.result ?? null, outcome.errorMessage ?? null, moves.length],
    }),
    // Its TransitionRecords in the same statement. Each hop bumps the version (from 1), so the
    // written version numbers them even when the statement's snapshot predates the row lock.
    also: ({ hops }) => ({
      sql: `INSERT INTO execution_transitions (execution_id, sequence_number, from_status, to_status, trigger, actor, actor_category, ts)
            SELECT moved.execution_id, greatest(moved.version - 1 - ?::int, coalesce((SELECT max(sequence_number) + 1 FROM execution_transitions WHERE execution_id = moved.execution_id), 0)) + h.n,
                   h.from_status, h.to_status, h.trigger, h.actor, h.actor_category, h.ts
            FROM moved, (VALUES ${hops.map(() => '(?::int, ?, ?, ?, ?, ?, ?::timestamptz)').join(', ')}) AS h(n, from_status, to_status, trigger, actor, actor_category, ts)`,
      params: [hops.length, ...hops.flatMap((h, i) => [i, h.from, h.to, h.trigger, moves[i]!.actor, actorCategory(moves[i]!.actor), at[i]])],
    }),
    oneStatement: true,
  });
  if (!moved) return [];
  const { row, hops, to } = moved;
  const factError = EXECUTION_CONTRACT_MACHINE.isTerminal(to) ? await recordFact(tx, row.execution_id) : undefined;
  return hops.map((h, i) => ({
    execution_id: row.execution_id,
    action_summary: row.action_summary,
    ...moveFacts(h.from, h.to, h.trigger as ExecutionTrigger, moves[i]!.actor, at[i]!),
    has_side_effects: row.irreversible,
    ...(factError && i === hops.length - 1 && { fact_error: factError }),
  }));
}

/** What an `execution_state` event says of a move itself (the contract's id, summary and side effects aside). */
export function moveFacts(from: ExecutionState, to: ExecutionState, trigger: ExecutionTrigger, actor: string, at: Date) {
  return {
    from_status: from,
    to_status: to,
    trigger,
    actor_category: actorCategory(actor),
    is_terminal: EXECUTION_CONTRACT_MACHINE.isTerminal(to),
    is_resumable: (EXECUTION_CONTRACT_MACHINE.resumable ?? []).includes(to),
    timestamp: at.getTime() / 1000,
  };
}

/**
 * Seed 004's memory summary of a contract that reached a terminal state, in
 * SESSION memory. Best-effort (abc_execution_fact, migration
 * tool_call_commit_functions): a failure writes no fact, its error is returned
 * (and recorded on the execution_state event), and it never fails the
 * transition it follows.
 */
async function recordFact(tx: EntityManager, executionId: string): Promise<string | undefined> {
  const [row] = await tx.execute<{ error: string | null }[]>('SELECT abc_execution_fact(?, ?) AS error', [executionId, newId('mem')]);
  return row?.error ?? undefined;
}

/** A result or error as an observer shows it: compact text, at most 1000 characters. */
export function summariseOutcome(value: unknown): string {
  const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
  return text.length > 1000 ? `${text.slice(0, 999)}…` : text;
}
