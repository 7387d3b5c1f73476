// Request rates per API key and per tenant: token buckets, one per name, kept
// in memory by each core. A key gets `rate` calls a second with bursts up to
// `burst`; a tenant the sum of its keys up to its own rate. Each core replica
// holds its own buckets (docs/security.md says why that is enough).
import { AbcError } from '../domain/errors.js';

export interface Rate {
  /** Calls per second, refilled continuously; 0 means no limit. */
  perSecond: number;
  /** How many calls may come at once. */
  burst: number;
}

/** Buckets beyond this many are forgotten, least recently used first: a forgotten bucket starts full. */
const MAX_BUCKETS = 50_000;

class Buckets {
  readonly #rate: Rate;
  readonly #buckets = new Map<string, { tokens: number; at: number }>();

  constructor(rate: Rate) {
    this.#rate = rate;
  }

  /** Takes one token; returns how many seconds until one is there, or 0 when taken. */
  take(name: string, now: number): number {
    const { perSecond, burst } = this.#rate;
    if (perSecond <= 0) return 0;
    const b = this.#buckets.get(name) ?? { tokens: burst, at: now };
    this.#buckets.delete(name);
    b.tokens = Math.min(burst, b.tokens + ((now - b.at) / 1000) * perSecond);
    b.at = now;
    const wait = b.tokens >= 1 ? 0 : (1 - b.tokens) / perSecond;
    if (wait === 0) b.tokens -= 1;
    this.#buckets.set(name, b);
    if (this.#buckets.size > MAX_BUCKETS) this.#buckets.delete(this.#buckets.keys().next().value!);
    return wait;
  }
}

export class RateLimiter {
  readonly #keys: Buckets;
  readonly #tenants: Buckets;

  constructor(limits: { key: Rate; tenant: Rate }) {
    this.#keys = new Buckets(limits.key);
    this.#tenants = new Buckets(limits.tenant);
  }

  /** Counts one call by `keyId` of `tenantId`; throws `rate_limited` (429, RESOURCE_EXHAUSTED) when over either rate. */
  admit(keyId: string, tenantId: string, now = Date.now()): void {
    const keyWait = this.#keys.take(keyId, now);
    const wait = keyWait || this.#tenants.take(tenantId, now);
    if (wait > 0) {
      const scope = keyWait > 0 ? 'key' : 'tenant';
      throw new AbcError('RESOURCE_EXHAUSTED', {
        code: 'rate_limited',
        category: 'EXECUTION',
        message: `too many requests for this ${scope}; retry after ${Math.ceil(wait)} s`,
        retryable: true,
        retryAfterSeconds: Math.max(1, Math.ceil(wait)),
        details: { limit: scope },
      });
    }
  }
}
