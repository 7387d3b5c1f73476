// Run tokens: the scoped credential an agent holds for one run.
import { randomBytes } from 'node:crypto';
import { sha256 } from '../domain/hash.js';
import { findRunByTokenHash } from '../orchestrator/run-store.js';
import type { Orm } from '../store/orm.js';
import { CREDENTIAL_CACHE_MAX, CREDENTIAL_CACHE_TTL_MS } from './api-keys.js';
import type { Principal } from './principal.js';
import { TtlCache } from './ttl-cache.js';

/** A new run token: `abcrun_` and 24 random bytes; only its hash is stored. */
export const newRunToken = () => `abcrun_${randomBytes(24).toString('base64url')}`;
export const hashToken = (token: string) => sha256(token);

export type RunPrincipal = Extract<Principal, { kind: 'run' }>;

export class RunTokens {
  readonly #orm: Orm;
  // Found tokens only: a token is random, so none is asked for before it exists. A token
  // replaced after its executor was lost stops working within the TTL, as a revoked key does.
  readonly #cache = new TtlCache<RunPrincipal>(CREDENTIAL_CACHE_TTL_MS, CREDENTIAL_CACHE_MAX);

  constructor(orm: Orm) {
    this.#orm = orm;
  }

  /** The token's run, or null when no run holds it. */
  async verify(token: string): Promise<RunPrincipal | null> {
    const tokenHash = hashToken(token);
    const hit = this.#cache.get(tokenHash);
    if (hit) return hit.value;
    const run = await findRunByTokenHash(this.#orm.em.fork(), tokenHash);
    if (!run) return null;
    const principal: RunPrincipal = { kind: 'run', runId: run.runId, sessionId: run.sessionId };
    this.#cache.set(tokenHash, principal);
    return principal;
  }
}
