// API keys: minted once, stored only as SHA-256 hashes.
import { randomBytes } from 'node:crypto';
import { sha256 } from '../domain/hash.js';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Orm } from '../store/orm.js';
import { ApiKey } from '../store/entities/index.js';
import type { Principal } from './principal.js';
import { TtlCache } from './ttl-cache.js';

export type KeyPrincipal = Extract<Principal, { kind: 'key' }>;

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

  /** Stores a key's hash under a name; storing the same key again changes nothing. */
  async register(key: string, name: string): Promise<KeyPrincipal> {
    const keyHash = hashKey(key);
    const em = this.#orm.em.fork();
    const existing = await em.findOne(ApiKey, { keyHash });
    if (existing) return { kind: 'key', keyId: existing.keyId, name: existing.name };
    const keyId = `key_${randomBytes(8).toString('hex')}`;
    em.create(ApiKey, { keyId, name, keyHash, prefix: key.slice(0, 8) });
    await em.flush();
    return { kind: 'key', keyId, name };
  }

  /** Mints, stores and returns a new key. The key is never retrievable again. */
  async create(name: string): Promise<{ key: string; principal: KeyPrincipal }> {
    const key = mintKey();
    return { key, principal: await this.register(key, name) };
  }

  /** The key's principal, or null when the key is unknown or revoked. Cached for 10 s. */
  async verify(key: string): Promise<KeyPrincipal | null> {
    const keyHash = hashKey(key);
    const hit = this.#cache.get(keyHash);
    if (hit) return hit.value;
    const row = await this.#orm.em.fork().findOne(ApiKey, { keyHash, revokedAt: null });
    const principal: KeyPrincipal | null = row ? { kind: 'key', keyId: row.keyId, name: row.name } : null;
    this.#cache.set(keyHash, principal);
    return principal;
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
