// The secrets table: sealed values, one row per version. Only access/secrets.ts
// seals and opens them; nothing else reads this table.
import type { EntityManager } from '@mikro-orm/postgresql';

export interface SecretVersion {
  name: string;
  version: number;
  sealed: string;
  createdAt: Date;
  retiresAt: Date | null;
}

type Raw = { name: string; version: number; sealed: string; created_at: Date; retires_at: Date | null };
const toVersion = (r: Raw): SecretVersion => ({ name: r.name, version: r.version, sealed: r.sealed, createdAt: new Date(r.created_at), retiresAt: r.retires_at && new Date(r.retires_at) });

/** Stores the next version and retires the current one after `graceMs`, in one transaction. */
export async function insertSecretVersion(tx: EntityManager, tenantId: string, name: string, sealed: string, graceMs: number): Promise<SecretVersion> {
  // The lock serialises writers of one name, so versions never collide.
  await tx.execute('SELECT pg_advisory_xact_lock(hashtext(?))', [`secret:${tenantId}:${name}`]);
  await tx.execute(
    `UPDATE secrets SET retires_at = now() + (? * interval '1 millisecond') WHERE tenant_id = ? AND name = ? AND retires_at IS NULL`,
    [graceMs, tenantId, name],
  );
  const [row] = await tx.execute<Raw[]>(
    `INSERT INTO secrets (tenant_id, name, version, sealed)
     VALUES (?, ?, coalesce((SELECT max(version) FROM secrets WHERE tenant_id = ? AND name = ?), 0) + 1, ?)
     RETURNING name, version, sealed, created_at, retires_at`,
    [tenantId, name, tenantId, name, sealed],
  );
  return toVersion(row!);
}

/** A version still usable: the current one (no version given), or a named one not yet retired. */
export async function usableSecretVersion(em: EntityManager, tenantId: string, name: string, version?: number): Promise<SecretVersion | undefined> {
  const [row] = await em.execute<Raw[]>(
    version === undefined
      ? 'SELECT name, version, sealed, created_at, retires_at FROM secrets WHERE tenant_id = ? AND name = ? AND retires_at IS NULL'
      : 'SELECT name, version, sealed, created_at, retires_at FROM secrets WHERE tenant_id = ? AND name = ? AND version = ? AND (retires_at IS NULL OR retires_at > now())',
    version === undefined ? [tenantId, name] : [tenantId, name, version],
  );
  return row && toVersion(row);
}

/** Every version of the tenant's secrets still usable, current first per name. */
export async function listSecretVersions(em: EntityManager, tenantId: string): Promise<SecretVersion[]> {
  const rows = await em.execute<Raw[]>(
    `SELECT name, version, sealed, created_at, retires_at FROM secrets
     WHERE tenant_id = ? AND (retires_at IS NULL OR retires_at > now()) ORDER BY name, version DESC`,
    [tenantId],
  );
  return rows.map(toVersion);
}
