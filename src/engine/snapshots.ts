// Seed 002 snapshots: the ExecutionContext at key phases (a prepared plan,
// each reviewed batch), for ROLLBACK. A snapshot holds the plan, every step's
// status, and the record fields a rollback restores. Outputs are not copied:
// a step that had succeeded at the snapshot is never put back by restoring
// it, so its output in ticket_steps is the one the snapshot saw.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { StepState } from '../domain/contract-lifecycle.machine.js';
import { newId } from '../runtime/new-id.js';
import type { ExecRecord } from './record.js';
import type { StepRow, TicketEventInput } from '../store/ticket-store.js';
import { readSnapshot, type SnapshotRow } from '../store/snapshot-store.js';

export interface SnapshotContent {
  label: string;
  plan_id: string | null;
  steps: Record<string, { status: StepState }>;
  record: Pick<ExecRecord, 'replan' | 'avoid' | 'approved_steps' | 'snapshot_id'> & Partial<Pick<ExecRecord, 'approved_inputs'>>;
}

/** A snapshot's row and its SNAPSHOT_CREATED event; the event and the row's INSERT (snapshotsInsert) go with the transition the caller commits it with. */
export function snapshotOf(ticket: string, state: string, label: string, planId: string | null, steps: StepRow[], rec: ExecRecord): { row: SnapshotRow & { content: SnapshotContent }; event: TicketEventInput } {
  const snapshotId = newId('snap');
  const content: SnapshotContent = {
    label,
    plan_id: planId,
    steps: Object.fromEntries(steps.map((s) => [s.step_id, { status: s.status }])),
    record: { replan: rec.replan, avoid: rec.avoid, approved_steps: rec.approved_steps, approved_inputs: rec.approved_inputs, snapshot_id: rec.snapshot_id },
  };
  const event: TicketEventInput = { type: 'SNAPSHOT_CREATED', payload: { snapshot_id: snapshotId, label, lifecycle_state: state, plan_id: planId, steps: Object.keys(content.steps).length } };
  return { row: { snapshotId, ticket, state, content }, event };
}

export async function restoreSnapshot(em: EntityManager, snapshotId: string): Promise<SnapshotContent | undefined> {
  return readSnapshot<SnapshotContent>(em, snapshotId);
}
