import { describe, expect, it } from 'vitest';
import { canonicalHash } from '../../src/domain/hash.js';
import { approvedFor, recordOf } from '../../src/engine/record.js';

describe("a step's approval", () => {
  const input = { amount: 120, to: 'acct-9' };

  it('holds for the planned input the human approved, whatever its key order', () => {
    const rec = recordOf({ engine: { approved_steps: ['wire'], approved_inputs: { wire: canonicalHash(input) } } });
    expect(approvedFor(rec, 'wire', { to: 'acct-9', amount: 120 })).toBe(true);
  });

  it('does not hold once a replan changes the input, nor for another step', () => {
    const rec = recordOf({ engine: { approved_steps: ['wire'], approved_inputs: { wire: canonicalHash(input) } } });
    expect(approvedFor(rec, 'wire', { ...input, amount: 1200 })).toBe(false);
    expect(approvedFor(rec, 'audit', input)).toBe(false);
  });

  it('holds by step for records written before inputs were kept', () => {
    expect(approvedFor(recordOf({ engine: { approved_steps: ['wire'] } }), 'wire', { anything: true })).toBe(true);
    expect(approvedFor(recordOf({ engine: null }), 'wire', input)).toBe(false);
  });
});
