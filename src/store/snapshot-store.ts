// The snapshots table (seed 002): insert-only copies of an execution's context at key phases.
import type { EntityManager } from '@mikro-orm/postgresql';

/** A snapshot as stored. */
export interface SnapshotRow {
  snapshotId: string;
  ticket: string;
  state: string;
  content: unknown;
}

/** Snapshots' INSERT: it goes with the statement of the transition they mark. */
export function snapshotsInsert(rows: SnapshotRow[]): { sql: string; params: unknown[] } {
  return {
    sql: `INSERT INTO snapshots (snapshot_id, ticket, lifecycle_state, context) VALUES ${rows.map(() => '(?, ?, ?, ?::jsonb)').join(', ')}`,
    params: rows.flatMap((r) => [r.snapshotId, r.ticket, r.state, JSON.stringify(r.content)]),
  };
}

export async function readSnapshot<T>(em: EntityManager, snapshotId: string): Promise<T | undefined> {
  const [row] = await em.execute<{ context: T }[]>('SELECT context FROM snapshots WHERE snapshot_id = ?', [snapshotId]);
  return row?.context;
}
