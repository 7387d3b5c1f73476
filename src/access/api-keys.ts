// API keys: minted once, stored only as SHA-256 hashes.
import { randomBytes } from 'node:crypto';
import { sha256 } from '../domain/hash.js';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Orm } from '../store/orm.js';
import { ApiKey, Tenant } from '../store/entities/index.js';
import { isUniqueViolation } from '../store/orm.js';
import { DEFAULT_TENANT, type KeyPrincipal } from './principal.js';
import type { Scope } from './scopes.js';
import { TtlCache } from '../runtime/ttl-cache.js';

export type { KeyPrincipal };

/** What a key is for; without options it is an admin key of the default tenant. */
export interface KeyGrant {
  tenantId?: string;
  scopes?: readonly Scope[];
  /** The IM users it may speak for. */
  userIds?: readonly string[] | null;
}

const TENANT_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;

type KeyRow = { keyId: string; name: string; tenantId: string; scopes: string[]; userIds?: string[] | null };
const toPrincipal = (row: KeyRow): KeyPrincipal => ({
  kind: 'key', keyId: row.keyId, name: row.name, tenantId: row.tenantId, scopes: row.scopes, userIds: row.userIds ?? null,
});

export const hashKey = (key: string) => sha256(key);

/** A new key: `abc_` and 32 random bytes, base64url. */
export const mintKey = () => `abc_${randomBytes(32).toString('base64url')}`;

/** How long a credential lookup is trusted: a revocation takes effect within this time. */
export const CREDENTIAL_CACHE_TTL_MS = 10_000;
export const CREDENTIAL_CACHE_MAX = 10_000;

export class ApiKeys {
  readonly #orm: Orm;
  readonly #cache = new TtlCache<KeyPrincipal | null>(CREDENTIAL_CACHE_TTL_MS, CREDENTIAL_CACHE_MAX);

  constructor(orm: Orm) {
    this.#orm = orm;
  }

  /** Stores a key's hash under a name; storing the same key again changes nothing. The tenant must exist. */
  async register(key: string, name: string, grant: KeyGrant = {}): Promise<KeyPrincipal> {
    const keyHash = hashKey(key);
    const em = this.#orm.em.fork();
    const existing = await em.findOne(ApiKey, { keyHash });
    if (existing) return toPrincipal(existing);
    const tenantId = grant.tenantId ?? DEFAULT_TENANT;
    if (!(await em.findOne(Tenant, { tenantId }))) throw new Error(`no tenant "${tenantId}"; create it with: abc tenants create ${tenantId}`);
    const row = em.create(ApiKey, {
      keyId: `key_${randomBytes(8).toString('hex')}`, name, keyHash, prefix: key.slice(0, 8), tenantId, scopes: [...(grant.scopes ?? ['admin'])], userIds: grant.userIds ? [...grant.userIds] : null,
    });
    try {
      await em.flush();
    } catch (error) {
      // Cores starting together register the same bootstrap key: the first one stored it.
      if (!isUniqueViolation(error)) throw error;
      return toPrincipal((await this.#orm.em.fork().findOne(ApiKey, { keyHash }))!);
    }
    return toPrincipal(row);
  }

  /** Mints, stores and returns a new key. The key is never retrievable again. */
  async create(name: string, grant: KeyGrant = {}): Promise<{ key: string; principal: KeyPrincipal }> {
    const key = mintKey();
    return { key, principal: await this.register(key, name, grant) };
  }

  /** Creates a tenant; false when it exists. */
  async createTenant(tenantId: string, name = tenantId): Promise<boolean> {
    if (!TENANT_ID.test(tenantId)) throw new Error('a tenant id is 1-64 of a-z 0-9 _ -, starting with a letter or digit');
    const em = this.#orm.em.fork();
    em.create(Tenant, { tenantId, name });
    try {
      await em.flush();
      return true;
    } catch (error) {
      if (isUniqueViolation(error)) return false;
      throw error;
    }
  }

  async tenants(): Promise<{ tenantId: string; name: string }[]> {
    return (await this.#orm.em.fork().find(Tenant, {}, { orderBy: { tenantId: 'asc' } })).map((t) => ({ tenantId: t.tenantId, name: t.name }));
  }

  /** The key's principal, or null when the key is unknown or revoked. Cached for 10 s. */
  async verify(key: string): Promise<KeyPrincipal | null> {
    const keyHash = hashKey(key);
    return this.#cache.getOrLoad(keyHash, async () => {
      const row = await this.#orm.em.fork().findOne(ApiKey, { keyHash, revokedAt: null });
      return row ? toPrincipal(row) : null;
    });
  }

  async count(): Promise<number> {
    return this.#orm.em.fork().count(ApiKey, { revokedAt: null });
  }
}

/**
 * The development key used when no key is configured: read from
 * `$ABC_DATA_DIR/dev-api-key`, or minted and written there on first start.
 */
export async function loadOrMintDevKey(dataDir: string): Promise<{ key: string; minted: boolean }> {
  const file = path.join(dataDir, 'dev-api-key');
  if (existsSync(file)) return { key: (await readFile(file, 'utf8')).trim(), minted: false };
  const key = mintKey();
  await mkdir(dataDir, { recursive: true });
  await writeFile(file, `${key}\n`, { mode: 0o600 });
  return { key, minted: true };
}
