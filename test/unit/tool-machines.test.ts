import { describe, expect, it } from 'vitest';
import { APPROVAL_MACHINE } from '../../src/domain/approval.machine.js';
import { transition, type Machine } from '../../src/domain/machine.js';
import { TOOL_CALL_MACHINE } from '../../src/domain/tool-call.machine.js';

/** Every (state, trigger) pair and where it leads, for a whole-table assertion. */
function table<S extends string, T extends string>(m: Machine<S, T>): Record<string, Record<string, string>> {
  const triggers = Object.keys(m.actors) as T[];
  return Object.fromEntries(
    m.states.map((s) => [s, Object.fromEntries(triggers.flatMap((t) => { const r = transition(m, s, t); return r.ok ? [[t, r.value]] : []; }))]),
  );
}

describe('the tool call machine (seed 001 §8.2)', () => {
  it('has exactly the seed edges', () => {
    expect(table(TOOL_CALL_MACHINE)).toEqual({
      CREATED: { policy_checked: 'POLICY_CHECKED' },
      POLICY_CHECKED: { block: 'BLOCKED', require_approval: 'WAITING_APPROVAL', dispatch: 'DISPATCHED' },
      BLOCKED: {},
      WAITING_APPROVAL: { approve: 'APPROVED', reject: 'REJECTED', time_out: 'TIMEOUT' },
      APPROVED: { start: 'RUNNING' },
      REJECTED: {},
      DISPATCHED: { start: 'RUNNING', fail: 'FAILED', time_out: 'TIMEOUT' },
      RUNNING: { succeed: 'SUCCEEDED', fail: 'FAILED', time_out: 'TIMEOUT' },
      SUCCEEDED: {},
      FAILED: {},
      TIMEOUT: {},
    });
  });

  it('ends only in BLOCKED, REJECTED, SUCCEEDED, FAILED and TIMEOUT', () => {
    expect([...TOOL_CALL_MACHINE.terminal].sort()).toEqual(['BLOCKED', 'FAILED', 'REJECTED', 'SUCCEEDED', 'TIMEOUT']);
  });

  it('refuses running a call twice once it has succeeded', () => {
    expect(transition(TOOL_CALL_MACHINE, 'SUCCEEDED', 'start')).toEqual({
      ok: false,
      error: { code: 'illegal_transition', machine: 'tool_call', from: 'SUCCEEDED', trigger: 'start' },
    });
  });
});

describe('the approval machine (seed 001 §8.3)', () => {
  it('goes from PENDING to one terminal state, once', () => {
    expect(table(APPROVAL_MACHINE)).toEqual({
      PENDING: { approve: 'APPROVED', reject: 'REJECTED', expire: 'EXPIRED' },
      APPROVED: {},
      REJECTED: {},
      EXPIRED: {},
    });
    expect(transition(APPROVAL_MACHINE, 'APPROVED', 'reject').ok).toBe(false);
  });
});
