// The seed 002 lifecycle is a table: every state maps to a seed 000 phase (or
// keeps the phase it stopped in), and moves off the table are errors.
import { describe, expect, it } from 'vitest';
import { CONTRACT_LIFECYCLE_MACHINE, CONTRACT_STEP_MACHINE, LIFECYCLE_STATES, PHASE_OF, statusOf } from '../../src/domain/contract-lifecycle.machine.js';
import { transition } from '../../src/domain/machine.js';

describe('the engine lifecycle', () => {
  it('holds every seed 002 state, with COMPLETED and FAILED terminal', () => {
    for (const s of ['INIT', 'CONTEXT_BUILD', 'PLAN_GENERATION', 'PLAN_CHECK', 'EXECUTION_PREPARE', 'STEP_EXECUTION', 'STEP_REVIEW', 'GLOBAL_REVIEW', 'REPLAN', 'WAIT_HUMAN', 'ROLLBACK', 'COMPLETED', 'FAILED']) {
      expect(LIFECYCLE_STATES).toContain(s);
    }
    expect(CONTRACT_LIFECYCLE_MACHINE.terminal).toEqual(['COMPLETED', 'FAILED', 'CANCELED']);
  });

  it('walks the happy path and the self-healing loops', () => {
    const walk = (from: string, triggers: string[]) =>
      triggers.reduce((s, t) => {
        const r = transition(CONTRACT_LIFECYCLE_MACHINE, s as never, t as never);
        if (!r.ok) throw new Error(`${s} --${t}--> illegal`);
        return r.value;
      }, from);
    expect(walk('INIT', ['start', 'context_built', 'plan_generated', 'plan_approved', 'prepared', 'steps_settled', 'review_passed', 'all_steps_done', 'review_passed', 'packaged'])).toBe('COMPLETED');
    expect(walk('STEP_REVIEW', ['replan', 'replanned', 'plan_approved', 'prepared'])).toBe('STEP_EXECUTION');
    expect(walk('STEP_REVIEW', ['rollback', 'restored'])).toBe('STEP_EXECUTION');
    expect(walk('STEP_EXECUTION', ['human_required', 'human_continue'])).toBe('STEP_EXECUTION');
    expect(walk('WAIT_HUMAN', ['human_timeout'])).toBe('FAILED');
  });

  it('refuses moves the table does not hold', () => {
    expect(transition(CONTRACT_LIFECYCLE_MACHINE, 'COMPLETED', 'halt')).toMatchObject({ ok: false, error: { code: 'illegal_transition', machine: 'contract_lifecycle' } });
    expect(transition(CONTRACT_LIFECYCLE_MACHINE, 'WAIT_HUMAN', 'steps_settled').ok).toBe(false);
    expect(transition(CONTRACT_LIFECYCLE_MACHINE, 'PLAN_GENERATION', 'human_continue').ok).toBe(false);
    expect(transition(CONTRACT_STEP_MACHINE, 'SUCCEEDED', 'retry').ok).toBe(false);
  });

  it('maps every state onto a seed 000 phase and status', () => {
    expect(LIFECYCLE_STATES.map((s) => [s, PHASE_OF[s], statusOf(s)])).toEqual([
      ['INIT', 'validate', 'QUEUED'],
      ['CONTEXT_BUILD', 'resolve_context', 'RUNNING'],
      ['PLAN_GENERATION', 'plan', 'RUNNING'],
      ['PLAN_CHECK', 'plan', 'RUNNING'],
      ['EXECUTION_PREPARE', 'plan', 'RUNNING'],
      ['STEP_EXECUTION', 'execute', 'RUNNING'],
      ['STEP_REVIEW', 'execute', 'RUNNING'],
      ['GLOBAL_REVIEW', 'aggregate', 'RUNNING'],
      ['REPLAN', 'plan', 'RUNNING'],
      ['WAIT_HUMAN', null, 'RUNNING'],
      ['ROLLBACK', 'execute', 'RUNNING'],
      ['PACKAGING', 'package', 'RUNNING'],
      ['COMPLETED', 'done', 'SUCCEEDED'],
      ['FAILED', null, 'FAILED'],
      ['CANCELED', null, 'CANCELED'],
    ]);
  });
});
