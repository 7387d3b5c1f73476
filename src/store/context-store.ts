// The versioned context store (seed 001 §12.1). ABC stores; it never interprets.
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError, invalidRequest, notFound } from '../domain/errors.js';
import { newId } from '../runtime/new-id.js';

export interface ContextBlobRow {
  contextKey: string;
  tenantId: string;
  ownerType: string;
  ownerId: string;
  version: number;
  data: unknown;
  createdAt: Date;
  updatedAt: Date;
}

export const OWNER_TYPES = ['agent', 'session', 'run'] as const;

/**
 * Writes the next version of a blob. With `expectedVersion`, fails with
 * `version_conflict` unless the stored version is exactly that (0 = must not exist).
 */
export async function putContext(
  tx: EntityManager,
  put: { tenantId: string; contextKey?: string; ownerType: string; ownerId: string; data: unknown; expectedVersion?: number },
): Promise<ContextBlobRow> {
  if (!(OWNER_TYPES as readonly string[]).includes(put.ownerType)) throw invalidRequest(`owner_type must be one of ${OWNER_TYPES.join(', ')}`, 'owner_type');
  if (!put.ownerId) throw invalidRequest('owner_id is required', 'owner_id');
  const key = put.contextKey || newId('ctx');
  if (key.length > 128) throw invalidRequest('context_key is at most 128 characters', 'context_key');
  const [current] = await tx.execute<{ version: number; owner_type: string; owner_id: string }[]>(
    'SELECT version, owner_type, owner_id FROM context_blobs WHERE tenant_id = ? AND context_key = ? FOR UPDATE',
    [put.tenantId, key],
  );
  if (put.expectedVersion !== undefined && (current?.version ?? 0) !== put.expectedVersion) {
    throw new AbcError('ABORTED', {
      code: 'version_conflict',
      category: 'VALIDATION',
      retryable: false,
      message: `context ${key} is at version ${current?.version ?? 0}, not ${put.expectedVersion}`,
      details: { context_key: key, current_version: current?.version ?? 0, expected_version: put.expectedVersion },
    });
  }
  if (current && (current.owner_type !== put.ownerType || current.owner_id !== put.ownerId)) {
    throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: `context ${key} belongs to another owner` });
  }
  const version = (current?.version ?? 0) + 1;
  const data = JSON.stringify(put.data ?? null);
  await tx.execute(
    `INSERT INTO context_blobs (context_key, tenant_id, owner_type, owner_id, version, data) VALUES (?, ?, ?, ?, ?, ?::jsonb)
     ON CONFLICT (tenant_id, context_key) DO UPDATE SET version = EXCLUDED.version, data = EXCLUDED.data, updated_at = now()`,
    [key, put.tenantId, put.ownerType, put.ownerId, version, data],
  );
  await tx.execute('INSERT INTO context_blob_versions (tenant_id, context_key, version, data) VALUES (?, ?, ?, ?::jsonb)', [put.tenantId, key, version, data]);
  return (await getContext(tx, put.tenantId, key))!;
}

/** The latest version, or `version` when given; another tenant's blob is null. */
export async function getContext(em: EntityManager, tenantId: string, contextKey: string, version?: number): Promise<ContextBlobRow | null> {
  const [row] = await em.execute<{ context_key: string; tenant_id: string; owner_type: string; owner_id: string; version: number; data: unknown; created_at: Date; updated_at: Date }[]>(
    version === undefined
      ? 'SELECT context_key, tenant_id, owner_type, owner_id, version, data, created_at, updated_at FROM context_blobs WHERE context_key = ? AND tenant_id = ?'
      : `SELECT b.context_key, b.tenant_id, b.owner_type, b.owner_id, v.version, v.data, b.created_at, v.created_at AS updated_at
         FROM context_blobs b JOIN context_blob_versions v ON v.tenant_id = b.tenant_id AND v.context_key = b.context_key WHERE b.context_key = ? AND b.tenant_id = ? AND v.version = ?`,
    version === undefined ? [contextKey, tenantId] : [contextKey, tenantId, version],
  );
  if (!row) return null;
  return {
    contextKey: row.context_key,
    tenantId: row.tenant_id,
    ownerType: row.owner_type,
    ownerId: row.owner_id,
    version: row.version,
    data: row.data,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

export async function getContextOrFail(em: EntityManager, tenantId: string, contextKey: string, version?: number): Promise<ContextBlobRow> {
  const blob = await getContext(em, tenantId, contextKey, version);
  if (!blob) throw notFound('context', version === undefined ? contextKey : `${contextKey}@${version}`);
  return blob;
}
