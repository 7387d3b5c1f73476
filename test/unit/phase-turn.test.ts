// The pure decisions of a workflow turn.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { boundaryMove, carryoverOf, currentStage, decidePhase, finalToolRecords, genuiOf, turnText, type ToolRecord } from '../../src/domain/phase-turn.js';
import type { PhaseDef, WorkflowDefinition } from '../../src/domain/workflow.js';

const def: WorkflowDefinition = JSON.parse(readFileSync('workflows/wealth-onboarding/1.0.0.json', 'utf8'));
const phase = (id: string) => def.phases.find((p) => p.id === id)!;

describe('a phase', () => {
  it('completes once its fields are present and its condition holds, and goes where its first holding rule says', () => {
    expect(decidePhase(def, phase('kyc'), { risk_tolerance: 'medium' })).toEqual({ completed: false, missing: ['horizon_years', 'investable_amount'] });
    expect(decidePhase(def, phase('kyc'), { risk_tolerance: 'reckless', horizon_years: 3, investable_amount: 10 })).toEqual({ completed: false, missing: [] });
    expect(decidePhase(def, phase('kyc'), { risk_tolerance: 'low', horizon_years: 3, investable_amount: 10 })).toEqual({ completed: true, missing: [], next: { to: 'pre_strategy', reason: 'the client profile is complete' } });
    const done = { scenario_set_id: 'a', stress_report_id: 'b' };
    expect(decidePhase(def, phase('stress_test'), { ...done, stress_test_decision: 'revise' }).next).toEqual({ to: 'strategy', reason: 'the stress test found problems' });
    expect(decidePhase(def, phase('stress_test'), { ...done, stress_test_decision: 'proceed' }).next).toMatchObject({ to: 'deployment' });
    // Completed with nowhere to go: the workflow's end.
    expect(decidePhase(def, phase('deployment'), { deployment_target: 'x', risk_guard_status: 'ok', deployment_id: 'd', deployment_status: 'completed' })).toEqual({ completed: true, missing: [] });
    // A phase with no rule never completes on its own.
    expect(decidePhase(def, { id: 'chat', instructions: 'Talk.' }, {})).toEqual({ completed: false, missing: [] });
  });

  it('is in the first stage whose conditions hold', () => {
    expect(currentStage(phase('stress_test'), {})?.id).toBe('bootstrap');
    expect(currentStage(phase('stress_test'), { scenario_set_id: 's' })?.id).toBe('scenario');
    expect(currentStage(phase('stress_test'), { scenario_set_id: 's', stress_report_id: 'r' })?.id).toBe('feedback');
    expect(currentStage(phase('deployment'), { deployment_id: 'd', deployment_status: 'deployed' })?.id).toBe('deployed');
    expect(currentStage(phase('kyc'), {})).toBeUndefined();
  });

  it('moves at a boundary when its guard holds', () => {
    expect(boundaryMove(def, 'deployment', {})).toBeUndefined();
    expect(boundaryMove(def, 'deployment', { blocker_code: 'RISK_LIMIT' })).toEqual({ to: 'strategy', reason: 'boundary: blocker_code' });
  });

  it('hands the next phase its carryover', () => {
    expect(carryoverOf(phase('kyc'), { from: 'kyc', to: 'pre_strategy', reason: 'r' }, { kyc: { risk_tolerance: 'low', horizon_years: 5, investable_amount: 100 } })).toBe(
      'Client profile from KYC: risk tolerance low, horizon 5 years, amount 100.',
    );
    expect(carryoverOf({ id: 'x', instructions: 'i' }, { from: 'x', to: 'y', reason: 'r' }, {})).toBeNull();
  });
});

describe('the text a turn ends with', () => {
  const p: PhaseDef = { id: 'ask', instructions: 'i', max_turns: 2, fallbacks: { empty_reply: 'Again?', stream_error: 'Lost.' } };
  const t = { text: '', streamError: false, turn: 1, completed: false, missing: [] as string[] };

  it.each([
    ['a reply as it is', { text: 'Hi.' }, { text: 'Hi.' }],
    ['a broken stream: what came, then its text', { text: 'Hal', streamError: true }, { text: 'Hal\n\nLost.', fallback: 'stream_error', added: 'Lost.' }],
    ['the turn limit, unless the phase completed', { text: 'Hi.', turn: 2 }, { text: 'Hi.\n\nWe have reached the limit of turns for this step.', fallback: 'turn_limit', added: 'We have reached the limit of turns for this step.' }],
    ['no limit once completed', { text: 'Hi.', turn: 2, completed: true }, { text: 'Hi.' }],
    ['an empty reply with fields missing', { missing: ['name', 'age'] }, { text: 'To go on I still need: name age', fallback: 'missing_fields', added: 'To go on I still need: name age' }],
    ['an empty reply', {}, { text: 'Again?', fallback: 'empty_reply', added: 'Again?' }],
  ])('%s', (_, change, expected) => {
    expect(turnText(p, { ...t, ...change })).toEqual(expected);
  });
});

describe('GenUI and tool records', () => {
  it('shows tagged payloads with a type and wrapped tool results, of the types the phase allows', () => {
    const out = genuiOf(phase('strategy'), [{ type: 'strategy_ref', id: 1 }, { id: 2 }, { type: 'stress_report' }], [
      { tool: 'strategy.backtest', ok: true, result: { r: 0.1 } },
      { tool: 'strategy.validate', ok: false, result: null },
    ]);
    expect(out.shown).toEqual([{ type: 'strategy_ref', id: 1 }, { type: 'backtest_charts', payload: { r: 0.1 }, source: 'strategy.backtest' }]);
    expect(out.dropped.map((d) => d.reason)).toEqual(['a GenUI payload needs a string type', 'type stress_report is not allowed in phase strategy']);
  });

  it('keep final outcomes: a failure a later success of the same call repaired is dropped', () => {
    const r = (tool: string, args_hash: string, status: ToolRecord['status']): ToolRecord => ({ tool_call_id: `${tool}-${args_hash}-${status}`, tool, args_hash, status });
    const records = [r('quote', 'a', 'failed'), r('quote', 'b', 'failed'), r('quote', 'a', 'succeeded'), r('run', 'a', 'failed')];
    expect(finalToolRecords(records).map((x) => x.tool_call_id)).toEqual(['quote-b-failed', 'quote-a-succeeded', 'run-a-failed']);
  });
});
