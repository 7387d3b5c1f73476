import { afterEach, describe, expect, it, vi } from 'vitest';
import { TtlCache } from '../../src/runtime/ttl-cache.js';

describe('the lookup cache', () => {
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

  it('loads a key once for a burst of misses, and keeps no failed lookup', async () => {
    const cache = new TtlCache<string | null>(60_000, 10);
    let loads = 0;
    const lookup = async () => {
      loads++;
      await new Promise((r) => setTimeout(r, 5));
      return 'principal';
    };
    expect(await Promise.all(Array.from({ length: 50 }, () => cache.getOrLoad('k', lookup)))).toEqual(Array(50).fill('principal'));
    expect(loads).toBe(1);
    expect(await cache.getOrLoad('k', lookup)).toBe('principal');
    expect(loads).toBe(1);

    const failing = () => Promise.reject(new Error('database away'));
    await expect(Promise.all([cache.getOrLoad('other', failing), cache.getOrLoad('other', failing)])).rejects.toThrow('database away');
    expect(cache.get('other')).toBeUndefined();
    expect(await cache.getOrLoad('other', async () => null)).toBeNull();
    expect(cache.get('other')).toEqual(expect.objectContaining({ value: null }));
  });

  it('clears its entries, and keeps nothing a lookup begun before the clear finds', async () => {
    const cache = new TtlCache<string>(60_000, 10);
    cache.set('a', 'old');
    let finish!: (v: string) => void;
    const stale = cache.getOrLoad('b', () => new Promise<string>((r) => (finish = r)));
    cache.clear();
    expect(cache.get('a')).toBeUndefined();
    // A lookup after the clear does not share the one before it.
    const fresh = cache.getOrLoad('b', async () => 'new');
    finish('stale');
    expect(await stale).toBe('stale');
    expect(await fresh).toBe('new');
    expect(cache.get('b')?.value).toBe('new');
  });
});
