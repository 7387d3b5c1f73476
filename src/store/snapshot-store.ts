// The snapshots table (seed 002): insert-only copies of an execution's context at key phases.
import type { EntityManager } from '@mikro-orm/postgresql';

/** A snapshot's INSERT: it goes with the statement of the transition it marks. */
export const snapshotInsert = (snapshotId: string, ticket: string, state: string, content: unknown) => ({
  sql: 'INSERT INTO snapshots (snapshot_id, ticket, lifecycle_state, context) VALUES (?, ?, ?, ?::jsonb)',
  params: [snapshotId, ticket, state, JSON.stringify(content)],
});

export async function readSnapshot<T>(em: EntityManager, snapshotId: string): Promise<T | undefined> {
  const [row] = await em.execute<{ context: T }[]>('SELECT context FROM snapshots WHERE snapshot_id = ?', [snapshotId]);
  return row?.context;
}
