// Workflow definitions as data: the reference workflow passes its checks, its
// phase table is a machine like every other, and versions stay additive.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { transition } from '../../src/domain/machine.js';
import { topologyOf } from '../../src/domain/topology.js';
import { phaseMachine, triggerOf, workflowBreaks, workflowProblems, type WorkflowDefinition } from '../../src/domain/workflow.js';

const reference = (): WorkflowDefinition => JSON.parse(readFileSync('workflows/wealth-onboarding/1.0.0.json', 'utf8'));

describe('the reference workflow', () => {
  it('has no problems', () => {
    expect(workflowProblems(reference())).toEqual([]);
  });

  it("runs seed 003's target table: strategy to stress test to deployment, back to strategy on problems or a blocker", () => {
    const m = phaseMachine(reference());
    const move = (from: string, trigger: string, to: string) => transition(m, from, triggerOf({ trigger: trigger as 'route', to }));
    expect(move('kyc', 'handler_completed', 'pre_strategy')).toEqual({ ok: true, value: 'pre_strategy' });
    expect(move('strategy', 'handler_completed', 'stress_test')).toEqual({ ok: true, value: 'stress_test' });
    expect(move('strategy', 'route', 'stress_test')).toEqual({ ok: true, value: 'stress_test' });
    expect(move('stress_test', 'handler_completed', 'deployment')).toEqual({ ok: true, value: 'deployment' });
    expect(move('stress_test', 'handler_completed', 'strategy')).toEqual({ ok: true, value: 'strategy' });
    expect(move('deployment', 'boundary', 'strategy')).toEqual({ ok: true, value: 'strategy' });
    // Skipping a phase, or going back where the table does not say, is illegal.
    expect(move('kyc', 'handler_completed', 'strategy')).toMatchObject({ ok: false, error: { code: 'illegal_transition', machine: 'workflow:wealth-onboarding@1.0.0', from: 'kyc' } });
    expect(move('deployment', 'handler_completed', 'kyc')).toMatchObject({ ok: false });
  });

  it('shows its phases in the topology, with who fires each move', () => {
    const t = topologyOf(phaseMachine(reference()));
    expect(t.initialStatus).toBe('kyc');
    expect(t.nodes.map((n) => n.status)).toEqual(['kyc', 'pre_strategy', 'strategy', 'stress_test', 'deployment']);
    expect(t.edges).toContainEqual({ fromStatus: 'deployment', toStatus: 'strategy', trigger: 'boundary:strategy', allowedActors: ['system'] });
    expect(t.edges).toContainEqual({ fromStatus: 'strategy', toStatus: 'stress_test', trigger: 'route:stress_test', allowedActors: ['client'] });
    expect(t.forbiddenTransitions).toContainEqual(expect.objectContaining({ fromStatus: 'kyc', toStatus: 'deployment' }));
  });
});

describe('workflow checks', () => {
  it('name the place of each broken reference', () => {
    const def = reference();
    def.initial_phase = 'intro';
    def.transitions.push({ from: 'kyc', to: 'nowhere', trigger: 'route' }, { from: 'kyc', to: 'kyc', trigger: 'route' });
    def.phases[1]!.next_phase = [{ to: 'deployment' }];
    def.phases[1]!.tools = { allowed: ['market.quote'], tool_choice: { name: 'stress.run' } };
    def.phases[0]!.carryover = { template: '{{#each /x}} never closed' };
    def.phases.push({ ...def.phases[0]!, instructions: 'again' });
    expect(workflowProblems(def).map((p) => p.pointer)).toEqual([
      '/phases/5/id',
      '/initial_phase',
      '/transitions/7/to',
      '/transitions/8/to',
      '/phases/0/carryover/template',
      '/phases/1/next_phase/0/to',
      '/phases/1/tools/tool_choice/name',
      '/phases/5/carryover/template',
    ]);
  });
});

describe('versions', () => {
  it('may change prompts, tools and rules, and add phases and transitions', () => {
    const next = reference();
    next.version = '1.1.0';
    next.phases[0]!.instructions = 'Kinder words.';
    next.phases.push({ id: 'review', instructions: 'Review the deployment.' });
    next.transitions.push({ from: 'deployment', to: 'review', trigger: 'handler_completed' });
    expect(workflowBreaks(reference(), next)).toEqual([]);
  });

  it('may not remove a phase or a transition, or move the start', () => {
    const next = reference();
    next.initial_phase = 'pre_strategy';
    next.phases = next.phases.filter((p) => p.id !== 'stress_test');
    next.transitions = next.transitions.filter((t) => t.trigger !== 'boundary');
    expect(workflowBreaks(reference(), next)).toEqual([
      'initial_phase changed from kyc to pre_strategy',
      'phase stress_test was removed',
      'transition deployment -> strategy on boundary was removed',
    ]);
  });
});
