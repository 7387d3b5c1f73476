// The lifecycle of a contract execution (seed 000): validate → resolve_context
// → plan → execute → aggregate → package → done. The ticket status and the
// progress phase a poller sees are both functions of this one state.
import { defineMachine } from './machine.js';

export const LIFECYCLE_STATES = ['QUEUED', 'RESOLVING_CONTEXT', 'PLANNING', 'EXECUTING', 'AGGREGATING', 'PACKAGING', 'SUCCEEDED', 'FAILED', 'CANCELED'] as const;
export type LifecycleState = (typeof LIFECYCLE_STATES)[number];
export type LifecycleTrigger = 'start' | 'context_resolved' | 'planned' | 'executed' | 'aggregated' | 'packaged' | 'fail' | 'cancel';

export type TicketStatus = 'QUEUED' | 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'CANCELED';
export type Phase = 'validate' | 'resolve_context' | 'plan' | 'execute' | 'aggregate' | 'package' | 'done';

const cancellable = { fail: 'FAILED', cancel: 'CANCELED' } as const;

export const CONTRACT_LIFECYCLE_MACHINE = defineMachine<LifecycleState, LifecycleTrigger>({
  name: 'contract_lifecycle',
  initial: 'QUEUED',
  states: LIFECYCLE_STATES,
  transitions: {
    QUEUED: { start: 'RESOLVING_CONTEXT', ...cancellable },
    RESOLVING_CONTEXT: { context_resolved: 'PLANNING', ...cancellable },
    PLANNING: { planned: 'EXECUTING', ...cancellable },
    EXECUTING: { executed: 'AGGREGATING', ...cancellable },
    AGGREGATING: { aggregated: 'PACKAGING', ...cancellable },
    PACKAGING: { packaged: 'SUCCEEDED', ...cancellable },
    SUCCEEDED: {},
    FAILED: {},
    CANCELED: {},
  },
  actors: {
    start: ['worker'],
    context_resolved: ['orchestrator'],
    planned: ['decision'],
    executed: ['orchestrator'],
    aggregated: ['orchestrator'],
    packaged: ['orchestrator'],
    fail: ['orchestrator', 'pep', 'system'],
    cancel: ['caller'],
  },
});

/** The poll-facing status and phase of a lifecycle state; `lastPhase` is where a finished ticket stopped. */
export function statusOf(state: LifecycleState): TicketStatus {
  if (state === 'QUEUED') return 'QUEUED';
  if (state === 'SUCCEEDED' || state === 'FAILED' || state === 'CANCELED') return state;
  return 'RUNNING';
}

export const PHASE_OF: Record<LifecycleState, Phase | null> = {
  QUEUED: 'validate',
  RESOLVING_CONTEXT: 'resolve_context',
  PLANNING: 'plan',
  EXECUTING: 'execute',
  AGGREGATING: 'aggregate',
  PACKAGING: 'package',
  SUCCEEDED: 'done',
  // A failed or cancelled ticket keeps the phase it stopped in.
  FAILED: null,
  CANCELED: null,
};

/** Where each phase starts on the 0–100 progress scale; execute spans 15–85 by finished steps. */
export const PHASE_PERCENT: Record<Phase, number> = { validate: 5, resolve_context: 10, plan: 15, execute: 15, aggregate: 85, package: 92, done: 100 };

/** Percent done for a phase, counting finished steps within execute. */
export function percentOf(phase: Phase, stepsDone: number, stepsTotal: number): number {
  if (phase !== 'execute' || stepsTotal === 0) return PHASE_PERCENT[phase];
  return Math.floor(15 + (70 * stepsDone) / stepsTotal);
}

export const STEP_STATES = ['PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'SKIPPED'] as const;
export type StepState = (typeof STEP_STATES)[number];
export type StepTrigger = 'start' | 'restart' | 'succeed' | 'fail' | 'skip';

/** One plan step as a poller sees it. */
export const CONTRACT_STEP_MACHINE = defineMachine<StepState, StepTrigger>({
  name: 'contract_step',
  initial: 'PENDING',
  states: STEP_STATES,
  transitions: {
    PENDING: { start: 'RUNNING', skip: 'SKIPPED', fail: 'FAILED' },
    // A step left RUNNING by a worker that died is started again from scratch.
    RUNNING: { restart: 'RUNNING', succeed: 'SUCCEEDED', fail: 'FAILED' },
    SUCCEEDED: {},
    FAILED: {},
    SKIPPED: {},
  },
  actors: { start: ['orchestrator'], restart: ['worker'], succeed: ['execution_unit'], fail: ['execution_unit', 'pep', 'orchestrator'], skip: ['decision', 'orchestrator'] },
});
