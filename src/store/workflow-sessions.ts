// Workflow sessions (seed 003): the phase a session stands in, its turns per
// phase and its carryover, in workflow_sessions; and phase_transitions, the
// audit of every phase move, made or refused. The table's one writer: a phase
// moves only through the phase machine (the one transition writer), and its
// audit record and the carryover for the next phase commit with it.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AbcError } from '../domain/errors.js';
import { err, ok, type Result } from '../domain/result.js';
import type { Machine } from '../domain/machine.js';
import { triggerOf, type TransitionTrigger } from '../domain/workflow.js';
import { newId } from '../runtime/new-id.js';
import { isIllegalTransition, writeTransition } from './transition.js';

export interface WorkflowSessionRow {
  session_id: string;
  tenant_id: string;
  workflow_id: string;
  workflow_version: string;
  phase: string;
  phase_turns: Record<string, number>;
  carryover: string | null;
  turn_run_id: string | null;
  turn_carryover: string | null;
}

export interface PhaseMove {
  sessionId: string;
  to: string;
  trigger: TransitionTrigger;
  /** Who moved it: the phase's handler, a client, or the system. */
  actor: string;
  reason: string;
  metadata?: Record<string, unknown>;
  /** The block the next phase's first turn receives. */
  carryover?: string | null;
  runId?: string;
}

export interface PhaseTransitionRow {
  transition_id: string;
  from_phase: string;
  to_phase: string;
  trigger: string;
  actor: string;
  reason: string;
  metadata: Record<string, unknown>;
  accepted: boolean;
  run_id: string | null;
  created_at: Date;
}

/** The session's workflow row, created in the workflow's initial phase on its first turn; locked. */
export async function openWorkflowSession(
  tx: EntityManager,
  s: { sessionId: string; tenantId: string; workflowId: string; version: string; initialPhase: string },
): Promise<WorkflowSessionRow> {
  await tx.execute(
    `INSERT INTO workflow_sessions (session_id, tenant_id, workflow_id, workflow_version, phase) VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO NOTHING`,
    [s.sessionId, s.tenantId, s.workflowId, s.version, s.initialPhase],
  );
  const [row] = await tx.execute<WorkflowSessionRow[]>('SELECT * FROM workflow_sessions WHERE session_id = ? FOR UPDATE', [s.sessionId]);
  return row!;
}

/**
 * Moves the session's phase through the workflow's machine and records the
 * move, with the carryover for the next phase, in the caller's transaction.
 * A move the table does not allow changes nothing, is recorded as refused,
 * and comes back as `illegal_transition`: the caller commits the record and
 * answers with the error.
 */
export async function movePhase(tx: EntityManager, machine: Machine<string, string>, m: PhaseMove): Promise<Result<{ from: string; to: string }, AbcError>> {
  const table = { machine, table: 'workflow_sessions', state: 'phase', key: ['session_id'] } as const;
  try {
    const move = await writeTransition<string, string, WorkflowSessionRow>(tx, table, triggerOf(m), {
      where: 'session_id = ?',
      params: [m.sessionId],
      set: () => ({ sql: ['carryover = ?', 'updated_at = now()'], params: [m.carryover ?? null] }),
    });
    if (!move) throw new Error(`no workflow session ${m.sessionId}`);
    await record(tx, move.row, move.from, m, true);
    return ok({ from: move.from, to: move.to });
  } catch (error) {
    if (!isIllegalTransition(error)) throw error;
    const [row] = await tx.execute<WorkflowSessionRow[]>('SELECT * FROM workflow_sessions WHERE session_id = ?', [m.sessionId]);
    await record(tx, row!, row!.phase, m, false, (error as AbcError).payload.message);
    return err(error as AbcError);
  }
}

async function record(tx: EntityManager, row: WorkflowSessionRow, from: string, m: PhaseMove, accepted: boolean, refusal?: string): Promise<void> {
  await tx.execute(
    `INSERT INTO phase_transitions (transition_id, session_id, tenant_id, workflow_id, workflow_version, from_phase, to_phase, trigger, actor, reason, metadata, accepted, run_id)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?)`,
    [
      newId('ptr'), row.session_id, row.tenant_id, row.workflow_id, row.workflow_version, from, m.to, m.trigger, m.actor,
      m.reason, JSON.stringify({ ...m.metadata, ...(refusal && { refused: refusal }) }), accepted, m.runId ?? null,
    ],
  );
}

/** A session's workflow row, if the session is a workflow's. */
export async function readWorkflowSession(em: EntityManager, sessionId: string): Promise<WorkflowSessionRow | undefined> {
  const [row] = await em.execute<WorkflowSessionRow[]>('SELECT * FROM workflow_sessions WHERE session_id = ?', [sessionId]);
  return row;
}

/**
 * Starts the run's turn in the session's current phase: counts it and takes
 * the carryover, once. The same run again (a turn resumed after its core
 * stopped) is not counted twice and gets the same carryover.
 */
export async function startTurn(tx: EntityManager, sessionId: string, runId: string): Promise<{ turn: number; carryover: string | null }> {
  // On the right of SET every column is its value before the update.
  const [row] = await tx.execute<{ turn: number; carryover: string | null }[]>(
    `UPDATE workflow_sessions SET
       phase_turns = CASE WHEN turn_run_id IS DISTINCT FROM ? THEN jsonb_set(phase_turns, ARRAY[phase], to_jsonb(coalesce((phase_turns->>phase)::int, 0) + 1)) ELSE phase_turns END,
       turn_carryover = CASE WHEN turn_run_id IS DISTINCT FROM ? THEN carryover ELSE turn_carryover END,
       carryover = CASE WHEN turn_run_id IS DISTINCT FROM ? THEN NULL ELSE carryover END,
       turn_run_id = ?, updated_at = now()
     WHERE session_id = ? RETURNING coalesce((phase_turns->>phase)::int, 0) AS turn, turn_carryover AS carryover`,
    [runId, runId, runId, runId, sessionId],
  );
  return row!;
}

/** The session's phase moves, made and refused, oldest first. */
export async function phaseTransitions(em: EntityManager, sessionId: string): Promise<PhaseTransitionRow[]> {
  const rows = await em.execute<PhaseTransitionRow[]>('SELECT * FROM phase_transitions WHERE session_id = ? ORDER BY created_at, transition_id', [sessionId]);
  return rows.map((r) => ({ ...r, created_at: new Date(r.created_at) }));
}
