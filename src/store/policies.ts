// The policies table: every policy document stored over the API, one row per
// version, the newest active. Storing one tells every core (POLICY_CHANNEL).
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError } from '../domain/errors.js';
import type { PolicyDocument } from '../domain/policy.js';
import { newId } from '../runtime/new-id.js';
import { POLICY_CHANNEL } from './event-bus.js';

export interface StoredPolicy {
  document: PolicyDocument;
  version: number;
  createdAt: Date;
}

/** Stores `document` as the active policy; its version must be above every stored one. */
export async function storePolicy(tx: EntityManager, document: PolicyDocument): Promise<StoredPolicy> {
  await tx.execute('SELECT pg_advisory_xact_lock(hashtext(?))', ['abc:policies']);
  const [top] = await tx.execute<{ version: number | null }[]>('SELECT max(version) AS version FROM policies');
  if (top?.version != null && document.version <= top.version) {
    throw new AbcError('ABORTED', {
      code: 'policy_version_conflict',
      category: 'VALIDATION',
      message: `version must be above ${top.version}, the newest stored policy's`,
      retryable: false,
      details: { field: 'version', stored_version: top.version },
    });
  }
  await tx.execute('UPDATE policies SET active = false WHERE active');
  const [row] = await tx.execute<{ created_at: Date }[]>(
    'INSERT INTO policies (policy_id, version, document, active) VALUES (?, ?, ?::jsonb, true) RETURNING created_at',
    [newId('pol'), document.version, JSON.stringify(document)],
  );
  await tx.execute('SELECT pg_notify(?, ?)', [POLICY_CHANNEL, String(document.version)]);
  return { document, version: document.version, createdAt: new Date(row!.created_at) };
}

export async function activePolicy(em: EntityManager): Promise<StoredPolicy | undefined> {
  const [row] = await em.execute<{ document: PolicyDocument; version: number; created_at: Date }[]>('SELECT document, version, created_at FROM policies WHERE active');
  return row && { document: row.document, version: row.version, createdAt: new Date(row.created_at) };
}
