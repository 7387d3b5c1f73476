// The snapshots table (seed 002): insert-only copies of an execution's context at key phases.
import type { EntityManager } from '@mikro-orm/postgresql';

export async function insertSnapshot(tx: EntityManager, snapshotId: string, ticket: string, state: string, content: unknown): Promise<void> {
  await tx.execute('INSERT INTO snapshots (snapshot_id, ticket, lifecycle_state, context) VALUES (?, ?, ?, ?::jsonb)', [snapshotId, ticket, state, JSON.stringify(content)]);
}

export async function readSnapshot<T>(em: EntityManager, snapshotId: string): Promise<T | undefined> {
  const [row] = await em.execute<{ context: T }[]>('SELECT context FROM snapshots WHERE snapshot_id = ?', [snapshotId]);
  return row?.context;
}
