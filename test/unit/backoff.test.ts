import { describe, expect, it } from 'vitest';
import { backoffDelay, DEFAULT_RETRY } from '../../src/domain/backoff.js';

describe('backoff (seed 001 §10.2)', () => {
  it('has the seed defaults', () => {
    expect(DEFAULT_RETRY).toEqual({ maxRetries: 3, initialDelayMs: 1000, maxDelayMs: 30_000, multiplier: 2, jitter: 0.1 });
  });

  it('doubles from 1 s and caps at 30 s, with no jitter at random = 0.5', () => {
    expect([0, 1, 2, 3, 4, 5, 6].map((n) => backoffDelay(DEFAULT_RETRY, n, 0.5))).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000]);
  });

  it('stays within ±10% jitter', () => {
    expect(backoffDelay(DEFAULT_RETRY, 1, 0)).toBe(1800);
    expect(backoffDelay(DEFAULT_RETRY, 1, 0.999999)).toBe(2200);
  });
});
