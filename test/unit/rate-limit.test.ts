// Token buckets per key and per tenant, on a clock the test moves.
import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/access/rate-limit.js';
import { AbcError } from '../../src/domain/errors.js';

const refusal = (f: () => void) => {
  try {
    f();
  } catch (error) {
    return (error as AbcError).payload;
  }
  return undefined;
};

describe('the rate limiter', () => {
  it('lets a key burst, then refills at its rate, and says when to come back', () => {
    const limiter = new RateLimiter({ key: { perSecond: 2, burst: 4 }, tenant: { perSecond: 0, burst: 0 } });
    for (let i = 0; i < 4; i++) expect(refusal(() => limiter.admit('k1', 't', 0))).toBeUndefined();
    expect(refusal(() => limiter.admit('k1', 't', 0))).toMatchObject({ code: 'rate_limited', retryAfterSeconds: 1, details: { limit: 'key' } });
    // Another key of the tenant has its own bucket.
    expect(refusal(() => limiter.admit('k2', 't', 0))).toBeUndefined();
    // Half a second later, one more call of k1 fits (2 a second).
    expect(refusal(() => limiter.admit('k1', 't', 500))).toBeUndefined();
    expect(refusal(() => limiter.admit('k1', 't', 500))).toBeDefined();
  });

  it("holds a tenant's keys together to the tenant's rate", () => {
    const limiter = new RateLimiter({ key: { perSecond: 100, burst: 100 }, tenant: { perSecond: 1, burst: 3 } });
    expect(['a', 'b', 'c'].map((k) => refusal(() => limiter.admit(k, 'acme', 0)))).toEqual([undefined, undefined, undefined]);
    expect(refusal(() => limiter.admit('d', 'acme', 0))).toMatchObject({ code: 'rate_limited', details: { limit: 'tenant' } });
    expect(refusal(() => limiter.admit('d', 'other', 0))).toBeUndefined();
    expect(refusal(() => limiter.admit('d', 'acme', 1000))).toBeUndefined();
  });

  it('limits nothing at rate 0', () => {
    const limiter = new RateLimiter({ key: { perSecond: 0, burst: 0 }, tenant: { perSecond: 0, burst: 0 } });
    for (let i = 0; i < 10_000; i++) limiter.admit('k', 't', 0);
  });
});
