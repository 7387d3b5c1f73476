// The policies table: every policy document stored over the API, one row per
// version; each tenant's newest is active, and so is the platform's (tenant
// `*`). Storing one tells every core (POLICY_CHANNEL).
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

/** Stores `document` as the tenant's active policy (`*`: the platform's); its version must be above every one the tenant stored. */
export async function storePolicy(tx: EntityManager, tenantId: string, document: PolicyDocument): Promise<StoredPolicy> {
  await tx.execute('SELECT pg_advisory_xact_lock(hashtext(?))', [`abc:policies:${tenantId}`]);
  const [top] = await tx.execute<{ version: number | null }[]>('SELECT max(version) AS version FROM policies WHERE tenant_id = ?', [tenantId]);
  if (top?.version != null && document.version <= top.version) {
    throw new AbcError('ABORTED', {
      code: 'policy_version_conflict',
      category: 'VALIDATION',
      message: `version must be above ${top.version}, the newest stored policy's`,
      retryable: false,
      details: { field: 'version', stored_version: top.version },
    });
  }
  await tx.execute('UPDATE policies SET active = false WHERE tenant_id = ? AND active', [tenantId]);
  const [row] = await tx.execute<{ created_at: Date }[]>(
    'INSERT INTO policies (policy_id, tenant_id, version, document, active) VALUES (?, ?, ?, ?::jsonb, true) RETURNING created_at',
    [newId('pol'), tenantId, document.version, JSON.stringify(document)],
  );
  await tx.execute('SELECT pg_notify(?, ?)', [POLICY_CHANNEL, tenantId]);
  return { document, version: document.version, createdAt: new Date(row!.created_at) };
}

/** Every tenant's active policy, the platform's under `*`. */
export async function activePolicies(em: EntityManager): Promise<Map<string, StoredPolicy>> {
  const rows = await em.execute<{ tenant_id: string; document: PolicyDocument; version: number; created_at: Date }[]>('SELECT tenant_id, document, version, created_at FROM policies WHERE active');
  return new Map(rows.map((r) => [r.tenant_id, { document: r.document, version: r.version, createdAt: new Date(r.created_at) }]));
}
