// Run tokens: the scoped credential an agent holds for one run.
import { randomBytes } from 'node:crypto';
import { sha256 } from '../domain/hash.js';
import { RUN_MACHINE } from '../domain/run.machine.js';
import { findRunByTokenHash } from '../store/run-store.js';
import type { Orm } from '../store/orm.js';
import { CREDENTIAL_CACHE_MAX, CREDENTIAL_CACHE_TTL_MS } from './api-keys.js';
import type { Principal } from './principal.js';
import { TtlCache } from '../runtime/ttl-cache.js';

/** A new run token: `abcrun_` and 24 random bytes; only its hash is stored. */
export const newRunToken = () => `abcrun_${randomBytes(24).toString('base64url')}`;
export const hashToken = (token: string) => sha256(token);

export type RunPrincipal = Extract<Principal, { kind: 'run' }>;

/** A verified run token: its run, and whether that run has ended (then only its transcript may be read). */
export interface RunCredential {
  principal: RunPrincipal;
  ended: boolean;
}

export class RunTokens {
  readonly #orm: Orm;
  // Tokens of live runs only: a token is random, so none is asked for before it exists. A
  // token replaced after its executor was lost stops working within the TTL, as a revoked
  // key does; a run's end evicts its token at once (`ended`, fed by the event bus).
  readonly #cache = new TtlCache<RunPrincipal>(CREDENTIAL_CACHE_TTL_MS, CREDENTIAL_CACHE_MAX);
  readonly #hashOfRun = new Map<string, string>();

  constructor(orm: Orm) {
    this.#orm = orm;
  }

  /** The token's run, or null when no run holds it. */
  async verify(token: string): Promise<RunCredential | null> {
    const tokenHash = hashToken(token);
    const hit = this.#cache.get(tokenHash);
    if (hit) return { principal: hit.value, ended: false };
    const run = await findRunByTokenHash(this.#orm.em.fork(), tokenHash);
    if (!run) return null;
    const principal: RunPrincipal = { kind: 'run', runId: run.runId, sessionId: run.sessionId, agentId: run.rootAgentId, tenantId: run.tenantId };
    const ended = RUN_MACHINE.isTerminal(run.status);
    if (!ended) {
      this.#cache.set(tokenHash, principal);
      if (this.#hashOfRun.size > CREDENTIAL_CACHE_MAX) this.#hashOfRun.clear();
      this.#hashOfRun.set(run.runId, tokenHash);
    }
    return { principal, ended };
  }

  /** Forgets the cached token of a run that has just ended. */
  ended(runId: string): void {
    const tokenHash = this.#hashOfRun.get(runId);
    if (tokenHash === undefined) return;
    this.#hashOfRun.delete(runId);
    this.#cache.delete(tokenHash);
  }
}
