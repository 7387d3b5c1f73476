import { describe, expect, it } from 'vitest';
import { transition } from '../../src/domain/machine.js';
import { RUN_MACHINE, RUN_STATES, type RunTrigger } from '../../src/domain/run.machine.js';

const TRIGGERS = Object.keys(RUN_MACHINE.actors) as RunTrigger[];

// Seed 001 §8.1, "may move to".
const ALLOWED: Record<string, string[]> = {
  CREATED: ['RUNNING'],
  RUNNING: ['PAUSED_WAITING_TOOL', 'PAUSED_WAITING_APPROVAL', 'DONE', 'FAILED', 'CANCELLED'],
  PAUSED_WAITING_TOOL: ['RUNNING', 'FAILED', 'CANCELLED'],
  PAUSED_WAITING_APPROVAL: ['RUNNING', 'FAILED', 'CANCELLED'],
  DONE: [],
  FAILED: [],
  CANCELLED: [],
};

describe('the run machine', () => {
  it.each(RUN_STATES.flatMap((s) => TRIGGERS.map((t) => [s, t] as const)))('%s --%s--> matches seed 001 §8.1', (state, trigger) => {
    const result = transition(RUN_MACHINE, state, trigger);
    if (result.ok) {
      expect(ALLOWED[state]).toContain(result.value);
    } else {
      expect(result.error).toEqual({ code: 'illegal_transition', machine: 'run', from: state, trigger });
    }
  });

  it('reaches every target the seed allows, and nothing else', () => {
    for (const state of RUN_STATES) {
      const reachable = TRIGGERS.map((t) => transition(RUN_MACHINE, state, t)).flatMap((r) => (r.ok ? [r.value] : []));
      expect(new Set(reachable)).toEqual(new Set(ALLOWED[state]));
    }
  });

  it('has DONE, FAILED and CANCELLED as its terminal states, with no exits', () => {
    expect([...RUN_MACHINE.terminal].sort()).toEqual(['CANCELLED', 'DONE', 'FAILED']);
    for (const state of RUN_MACHINE.terminal) expect(TRIGGERS.every((t) => !transition(RUN_MACHINE, state, t).ok)).toBe(true);
  });

  it('starts in CREATED and resumes from the paused states', () => {
    expect(RUN_MACHINE.initial).toBe('CREATED');
    expect(RUN_MACHINE.resumable).toEqual(['PAUSED_WAITING_TOOL', 'PAUSED_WAITING_APPROVAL']);
  });
});
