import { afterEach, describe, expect, it, vi } from 'vitest';
import { TtlCache } from '../../src/access/ttl-cache.js';

describe('credential cache', () => {
  afterEach(() => vi.useRealTimers());

  it('keeps an entry, a cached null included, until its TTL passes', () => {
    vi.useFakeTimers();
    const cache = new TtlCache<string | null>(1000, 10);
    cache.set('a', 'principal');
    cache.set('unknown', null);
    expect(cache.get('a')).toEqual(expect.objectContaining({ value: 'principal' }));
    expect(cache.get('unknown')).toEqual(expect.objectContaining({ value: null }));
    vi.advanceTimersByTime(1001);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('unknown')).toBeUndefined();
  });

  it('drops the oldest entry when full', () => {
    const cache = new TtlCache<number>(60_000, 2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('c', 3);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')?.value).toBe(2);
    expect(cache.get('c')?.value).toBe(3);
  });
});
