import { describe, expect, it } from 'vitest';
import { frozen, frozenOnce } from '../../src/domain/engine-types.js';

describe('frozen', () => {
  it('gives a deep-frozen copy and leaves the original as it was', () => {
    const original = { a: { b: [1, { c: 2 }] }, at: new Date(0), none: null };
    const copy = frozen(original);
    expect(copy).toEqual(original);
    expect(copy.a).not.toBe(original.a);
    for (const part of [copy, copy.a, copy.a.b, copy.a.b[1]]) expect(Object.isFrozen(part)).toBe(true);
    expect(() => ((copy.a.b[1] as { c: number }).c = 3)).toThrow(TypeError);
    original.a.b.push(9);
    expect(copy.a.b).toHaveLength(2);
    expect(copy.at).not.toBe(original.at);
    expect(copy.at.getTime()).toBe(0);
  });

  it('shares a value frozen once instead of copying it again, and never shares a mutable one', () => {
    const stored = { steps: [{ id: 's1' }] };
    const once = frozenOnce(stored);
    expect(frozenOnce(stored)).toBe(once);
    expect(Object.isFrozen(once.steps[0])).toBe(true);
    const view = frozen({ plan: once, other: stored });
    expect(view.plan).toBe(once);
    expect(view.other).not.toBe(stored);
    // A shallow freeze made elsewhere is no proof of depth: it is copied and frozen all the way down.
    const shallow = Object.freeze({ inner: { n: 1 } });
    const copied = frozen({ shallow });
    expect(copied.shallow).not.toBe(shallow);
    expect(Object.isFrozen(copied.shallow.inner)).toBe(true);
  });

  it('keeps a "__proto__" key of parsed JSON a key, and the copy a plain object', () => {
    const parsed = JSON.parse('{"__proto__": {"admin": true}, "n": 1}') as Record<string, unknown>;
    const copy = frozen(parsed);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toEqual(['__proto__', 'n']);
    expect((copy as { admin?: boolean }).admin).toBeUndefined();
    expect(Object.isFrozen(Object.getOwnPropertyDescriptor(copy, '__proto__')!.value)).toBe(true);
  });
});
