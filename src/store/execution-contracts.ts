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
function now(): Date {
  last = Math.max(Date.now(), last + 1);
  return new Date(last);
}

export async function openContract(tx: EntityManager, c: NewContract): Promise<string> {
  const executionId = newId('exe');
  await tx.execute(
    `INSERT INTO execution_contracts (execution_id, tenant_id, session_id, run_id, ticket, subject_id, action_type, action_summary, status, irreversible, idempotency_key, timeout_seconds, created_at, entered_at)
     VALUES (?, COALESCE((SELECT tenant_id FROM runs WHERE run_id = ?), (SELECT tenant_id FROM tickets WHERE ticket = ?), 'default'), ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)`,
    // The node clock, like the transitions: contracts opened in one transaction still order by creation.
    [executionId, c.runId ?? null, c.ticket ?? null, c.sessionId, c.runId ?? null, c.ticket ?? null, c.subjectId, c.actionType, c.actionSummary.slice(0, 500), c.irreversible, c.idempotencyKey ?? null, c.timeoutSeconds ?? null, now(), now()],
  );
  return executionId;
}

/**
 * Moves the contract mirroring `subjectId` (of a ticket or a run) by `trigger`,
 * records the transition, and returns the `execution_state` event to emit.
 * A subject with no contract (created before contracts were mirrored) is left
 * alone: undefined.
 */
const CONTRACTS: MachineTable<ExecutionState, ExecutionTrigger> = { machine: EXECUTION_CONTRACT_MACHINE, table: 'execution_contracts', state: 'status', key: ['execution_id'] };

export async function moveContract(
  tx: EntityManager,
  where: { ticket?: string; runId?: string; subjectId: string },
  trigger: ExecutionTrigger,
  actor: string,
  outcome: { result?: string; errorMessage?: string } = {},
): Promise<ExecutionStateEvent | undefined> {
  const at = now();
  const moved = await writeTransition<ExecutionState, ExecutionTrigger, { execution_id: string; status: ExecutionState; action_summary: string; irreversible: boolean }>(tx, CONTRACTS, trigger, {
    columns: 'execution_id, status, action_summary, irreversible',
    where: `subject_id = ? AND ${where.ticket ? 'ticket = ?' : 'run_id = ?'}`,
    params: [where.subjectId, where.ticket ?? where.runId],
    order: 'created_at DESC',
    set: () => ({ sql: ['entered_at = ?', 'result = coalesce(?, result)', 'error_message = coalesce(?, error_message)', 'version = version + 1'], params: [at, outcome.result ?? null, outcome.errorMessage ?? null] }),
    // Its TransitionRecord in the same statement. Each move bumps the version (from 1), so the
    // written version numbers it even when the statement's snapshot predates the row lock.
    also: ({ from, to: next }) => ({
      sql: `INSERT INTO execution_transitions (execution_id, sequence_number, from_status, to_status, trigger, actor, actor_category, ts)
            SELECT moved.execution_id, greatest(moved.version - 2, coalesce((SELECT max(sequence_number) + 1 FROM execution_transitions WHERE execution_id = moved.execution_id), 0)), ?, ?, ?, ?, ?, ? FROM moved`,
      params: [from, next, trigger, actor, actorCategory(actor), at],
    }),
    oneStatement: true,
  });
  if (!moved) return undefined;
  const { row, to } = moved;
  const factError = EXECUTION_CONTRACT_MACHINE.isTerminal(to) ? await recordFact(tx, row.execution_id) : undefined;
  return {
    execution_id: row.execution_id,
    action_summary: row.action_summary,
    from_status: row.status,
    to_status: to,
    trigger,
    actor_category: actorCategory(actor),
    is_terminal: EXECUTION_CONTRACT_MACHINE.isTerminal(to),
    is_resumable: (EXECUTION_CONTRACT_MACHINE.resumable ?? []).includes(to),
    has_side_effects: row.irreversible,
    timestamp: at.getTime() / 1000,
    ...(factError && { fact_error: factError }),
  };
}

/**
 * Seed 004's memory summary of a contract that reached a terminal state, in
 * SESSION memory. Best-effort: it runs under a savepoint, so a failure rolls
 * back only the fact, its error is returned (and recorded on the
 * execution_state event), and it never fails the transition it follows.
 */
async function recordFact(tx: EntityManager, executionId: string): Promise<string | undefined> {
  try {
    // The savepoint, the fact and the release in one round trip.
    await tx.execute(
      `SAVEPOINT execution_fact;
       INSERT INTO memory (memory_id, tenant_id, scope, scope_id, key, value, tags)
       SELECT ?, c.tenant_id, 'SESSION', c.session_id, 'execution_fact:' || c.execution_id,
              jsonb_build_object('type', 'execution_fact', 'execution_id', c.execution_id, 'action_type', c.action_type,
                'action_summary', c.action_summary, 'final_status', c.status, 'irreversible', c.irreversible,
                'duration_ms', floor(extract(epoch FROM (SELECT max(t.ts) FROM execution_transitions t WHERE t.execution_id = c.execution_id) - c.created_at) * 1000),
                'result_summary', left(c.result, 200), 'error_summary', left(c.error_message, 200)),
              '["execution_fact"]'::jsonb
       FROM execution_contracts c WHERE c.execution_id = ?;
       RELEASE SAVEPOINT execution_fact`,
      [newId('mem'), executionId],
    );
    return undefined;
  } catch (error) {
    await tx.execute('ROLLBACK TO SAVEPOINT execution_fact');
    return String((error as Error).message ?? error).slice(0, 200);
  }
}

/** A result or error as an observer shows it: compact text, at most 1000 characters. */
export function summariseOutcome(value: unknown): string {
  const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
  return text.length > 1000 ? `${text.slice(0, 999)}…` : text;
}
