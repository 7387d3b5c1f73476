// Seed 002 policy, pure: evaluate_transition bounds the self-healing loop and
// weighs risk; check_tool_permission is role × tool.
import { describe, expect, it } from 'vitest';
import { checkToolPermission, DEFAULT_SETTINGS, evaluateTransition, riskOf, settingsOf, type LoopCounters } from '../../src/domain/engine-policy.js';
import { frozen, structuredError, type GlobalState, type ToolFacts } from '../../src/domain/engine-types.js';

const g = (iteration = 0): GlobalState => frozen({ execution_id: 'tkt_1', original_goal: 'analyze_portfolio', lifecycle_state: 'STEP_REVIEW', iteration_count: iteration, trace_id: 't', created_at: '2026-11-22T00:00:00Z' });
const counters = (over: Partial<LoopCounters> = {}): LoopCounters => ({ consecutive_failures: 0, attempts: {}, local_replans: {}, approved_steps: [], ...over });
const tool = (over: Partial<ToolFacts> = {}): ToolFacts => ({ name: 'tool.x', permission_level: 'PUBLIC', side_effect: false, ...over });
const failure = (e: ReturnType<typeof structuredError>, step = 's1') => ({ kind: 'failure' as const, step_id: step, error: e });

describe('evaluate_transition', () => {
  it('retries a retryable error while the step has retries left, then replans', () => {
    const e = structuredError('TIMEOUT', 'slow', { retryable: true });
    expect(evaluateTransition(g(), counters(), DEFAULT_SETTINGS, failure(e))).toMatchObject({ allow: true, action: 'RETRY', next_state: 'STEP_EXECUTION' });
    expect(evaluateTransition(g(), counters({ attempts: { s1: 2 } }), DEFAULT_SETTINGS, failure(e))).toMatchObject({ action: 'REPLAN', scope: 'LOCAL' });
  });

  it('replans LOCAL first, then GLOBAL; an error may ask for its scope', () => {
    const e = structuredError('BAD', 'bad');
    expect(evaluateTransition(g(), counters(), DEFAULT_SETTINGS, failure(e))).toMatchObject({ action: 'REPLAN', scope: 'LOCAL', next_state: 'REPLAN' });
    expect(evaluateTransition(g(), counters({ local_replans: { s1: 1 } }), DEFAULT_SETTINGS, failure(e))).toMatchObject({ action: 'REPLAN', scope: 'GLOBAL' });
    expect(evaluateTransition(g(), counters(), DEFAULT_SETTINGS, failure(structuredError('X', 'x', { suggested_action: 'REPLAN', metadata: { replan_scope: 'GLOBAL' } })))).toMatchObject({ scope: 'GLOBAL' });
  });

  it('follows ROLLBACK and HALT as the error suggests', () => {
    expect(evaluateTransition(g(), counters(), DEFAULT_SETTINGS, failure(structuredError('X', 'x', { suggested_action: 'ROLLBACK' })))).toMatchObject({ action: 'ROLLBACK', scope: 'LOCAL', next_state: 'ROLLBACK' });
    expect(evaluateTransition(g(), counters(), DEFAULT_SETTINGS, failure(structuredError('X', 'x', { suggested_action: 'ROLLBACK', metadata: { rollback_scope: 'GLOBAL' } })))).toMatchObject({ scope: 'GLOBAL' });
    expect(evaluateTransition(g(), counters(), DEFAULT_SETTINGS, failure(structuredError('X', 'x', { suggested_action: 'HALT' })))).toMatchObject({ allow: false, action: 'HALT', next_state: 'FAILED' });
  });

  it('halts after max_consecutive_failures in a row, and after max_iterations', () => {
    const e = structuredError('TIMEOUT', 'slow', { retryable: true });
    expect(evaluateTransition(g(), counters({ consecutive_failures: 2 }), DEFAULT_SETTINGS, failure(e))).toMatchObject({ action: 'HALT', reason: '3 consecutive failures reached the limit of 3' });
    expect(evaluateTransition(g(10), counters(), DEFAULT_SETTINGS, failure(e))).toMatchObject({ action: 'HALT', reason: '10 self-healing iterations reached the limit of 10' });
  });

  it('sends low confidence to a human, or to a replan when configured so', () => {
    const low = { kind: 'low_confidence' as const, step_id: 's1', confidence: 0.2 };
    expect(evaluateTransition(g(), counters(), DEFAULT_SETTINGS, low)).toMatchObject({ action: 'WAIT_HUMAN', require_human_approval: true, next_state: 'WAIT_HUMAN' });
    expect(evaluateTransition(g(), counters(), settingsOf({ low_confidence_action: 'REPLAN' }), low)).toMatchObject({ action: 'REPLAN' });
  });

  it('holds a step at or above human_approval_risk until a human approved it', () => {
    const admin = { kind: 'step_start' as const, step_id: 'pay', tool: tool({ permission_level: 'ADMIN' }) };
    expect(evaluateTransition(g(), counters(), DEFAULT_SETTINGS, admin)).toMatchObject({ allow: false, risk_level: 'CRITICAL', require_human_approval: true, action: 'WAIT_HUMAN' });
    expect(evaluateTransition(g(), counters({ approved_steps: ['pay'] }), DEFAULT_SETTINGS, admin)).toMatchObject({ allow: true, risk_level: 'CRITICAL' });
    const effect = { kind: 'step_start' as const, step_id: 'mail', tool: tool({ side_effect: true }) };
    expect(evaluateTransition(g(), counters(), DEFAULT_SETTINGS, effect)).toMatchObject({ allow: true, risk_level: 'HIGH' });
    expect(evaluateTransition(g(), counters(), settingsOf({ human_approval_risk: 'HIGH' }), effect)).toMatchObject({ allow: false, action: 'WAIT_HUMAN' });
  });
});

describe('check_tool_permission and risk', () => {
  it('lets only the executor call tools by default, and honours an assembly matrix', () => {
    expect(checkToolPermission('STEP_EXECUTOR', tool({ permission_level: 'ADMIN' }), DEFAULT_SETTINGS)).toBe(true);
    expect(checkToolPermission('PLANNER', tool(), DEFAULT_SETTINGS)).toBe(false);
    const strict = settingsOf({ role_permissions: { STEP_EXECUTOR: ['PUBLIC'] } as never });
    expect(checkToolPermission('STEP_EXECUTOR', tool({ permission_level: 'INTERNAL' }), strict)).toBe(false);
    expect(checkToolPermission('STEP_EXECUTOR', tool(), strict)).toBe(true);
    expect(strict.role_permissions.REVIEWER).toEqual([]);
  });

  it('rates ADMIN critical, side effects high, INTERNAL medium, the rest low', () => {
    expect([riskOf(tool({ permission_level: 'ADMIN' })), riskOf(tool({ side_effect: true })), riskOf(tool({ permission_level: 'INTERNAL' })), riskOf(tool())]).toEqual(['CRITICAL', 'HIGH', 'MEDIUM', 'LOW']);
  });
});
