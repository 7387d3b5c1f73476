// The lifecycle of a contract execution: seed 002's engine states, plus the two
// seed 000 needs (PACKAGING for its package phase, CANCELED for its cancel).
// The ticket status and the progress phase a poller sees are both functions of
// this one state; the engine is its only writer.
import { defineMachine } from './machine.js';

export const LIFECYCLE_STATES = [
  'INIT',
  'CONTEXT_BUILD',
  'PLAN_GENERATION',
  'PLAN_CHECK',
  'EXECUTION_PREPARE',
  'STEP_EXECUTION',
  'STEP_REVIEW',
  'GLOBAL_REVIEW',
  'REPLAN',
  'WAIT_HUMAN',
  'ROLLBACK',
  'PACKAGING',
  'COMPLETED',
  'FAILED',
  'CANCELED',
] as const;
export type LifecycleState = (typeof LIFECYCLE_STATES)[number];
export type LifecycleTrigger =
  | 'start'
  | 'context_built'
  | 'plan_generated'
  | 'plan_approved'
  | 'plan_rejected'
  | 'prepared'
  | 'steps_settled'
  | 'all_steps_done'
  | 'review_passed'
  | 'retry'
  | 'replan'
  | 'replanned'
  | 'rollback'
  | 'restored'
  | 'human_required'
  | 'human_continue'
  | 'human_replan'
  | 'human_reject'
  | 'human_timeout'
  | 'packaged'
  | 'halt'
  | 'cancel';

export type TicketStatus = 'QUEUED' | 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'CANCELED';
export type Phase = 'validate' | 'resolve_context' | 'plan' | 'execute' | 'aggregate' | 'package' | 'done';

const exits = { halt: 'FAILED', cancel: 'CANCELED' } as const;

export const CONTRACT_LIFECYCLE_MACHINE = defineMachine<LifecycleState, LifecycleTrigger>({
  name: 'contract_lifecycle',
  initial: 'INIT',
  states: LIFECYCLE_STATES,
  transitions: {
    INIT: { start: 'CONTEXT_BUILD', cancel: 'CANCELED' },
    CONTEXT_BUILD: { context_built: 'PLAN_GENERATION', ...exits },
    PLAN_GENERATION: { plan_generated: 'PLAN_CHECK', ...exits },
    PLAN_CHECK: { plan_approved: 'EXECUTION_PREPARE', plan_rejected: 'REPLAN', ...exits },
    EXECUTION_PREPARE: { prepared: 'STEP_EXECUTION', ...exits },
    STEP_EXECUTION: { steps_settled: 'STEP_REVIEW', all_steps_done: 'GLOBAL_REVIEW', human_required: 'WAIT_HUMAN', ...exits },
    STEP_REVIEW: { review_passed: 'STEP_EXECUTION', retry: 'STEP_EXECUTION', replan: 'REPLAN', rollback: 'ROLLBACK', human_required: 'WAIT_HUMAN', ...exits },
    GLOBAL_REVIEW: { review_passed: 'PACKAGING', replan: 'REPLAN', human_required: 'WAIT_HUMAN', ...exits },
    REPLAN: { replanned: 'PLAN_CHECK', ...exits },
    ROLLBACK: { restored: 'STEP_EXECUTION', ...exits },
    WAIT_HUMAN: { human_continue: 'STEP_EXECUTION', human_replan: 'REPLAN', human_reject: 'FAILED', human_timeout: 'FAILED', cancel: 'CANCELED' },
    PACKAGING: { packaged: 'COMPLETED', ...exits },
    COMPLETED: {},
    FAILED: {},
    CANCELED: {},
  },
  actors: {
    start: ['worker'],
    context_built: ['engine'],
    plan_generated: ['engine'],
    plan_approved: ['engine'],
    plan_rejected: ['engine'],
    prepared: ['engine'],
    steps_settled: ['engine'],
    all_steps_done: ['engine'],
    review_passed: ['engine'],
    retry: ['engine'],
    replan: ['engine'],
    replanned: ['engine'],
    rollback: ['engine'],
    restored: ['engine'],
    human_required: ['engine'],
    human_continue: ['human'],
    human_replan: ['human'],
    human_reject: ['human'],
    human_timeout: ['system'],
    packaged: ['engine'],
    halt: ['engine', 'system'],
    cancel: ['caller'],
  },
});

/** The poll-facing status of a lifecycle state. */
export function statusOf(state: LifecycleState): TicketStatus {
  if (state === 'INIT') return 'QUEUED';
  if (state === 'COMPLETED') return 'SUCCEEDED';
  if (state === 'FAILED' || state === 'CANCELED') return state;
  return 'RUNNING';
}

/**
 * The seed 000 progress phase of each state. Null keeps the phase the ticket
 * was in: a human wait, a failure or a cancel says where it stopped.
 */
export const PHASE_OF: Record<LifecycleState, Phase | null> = {
  INIT: 'validate',
  CONTEXT_BUILD: 'resolve_context',
  PLAN_GENERATION: 'plan',
  PLAN_CHECK: 'plan',
  EXECUTION_PREPARE: 'plan',
  STEP_EXECUTION: 'execute',
  STEP_REVIEW: 'execute',
  ROLLBACK: 'execute',
  // Planning again is planning: the poll says so rather than pretend progress.
  REPLAN: 'plan',
  WAIT_HUMAN: null,
  GLOBAL_REVIEW: 'aggregate',
  PACKAGING: 'package',
  COMPLETED: 'done',
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
export type StepTrigger = 'start' | 'restart' | 'succeed' | 'fail' | 'skip' | 'await_human' | 'retry' | 'reset';

/** One plan step as a poller sees it (seed 002's StepStatus, with SUCCEEDED for COMPLETED as seed 000 spells it). */
export const CONTRACT_STEP_MACHINE = defineMachine<StepState, StepTrigger>({
  name: 'contract_step',
  initial: 'PENDING',
  states: STEP_STATES,
  transitions: {
    // A step held for a human stays PENDING, with the reason as its message.
    PENDING: { start: 'RUNNING', skip: 'SKIPPED', fail: 'FAILED', await_human: 'PENDING' },
    // A step left RUNNING by a worker that died is started again from scratch.
    RUNNING: { restart: 'RUNNING', succeed: 'SUCCEEDED', fail: 'FAILED' },
    // A rollback or a replan puts a step back (never one with side effects that succeeded).
    SUCCEEDED: { reset: 'PENDING' },
    FAILED: { retry: 'PENDING', reset: 'PENDING' },
    SKIPPED: { reset: 'PENDING' },
  },
  actors: {
    start: ['engine'],
    restart: ['worker'],
    succeed: ['execution_unit'],
    fail: ['execution_unit', 'pep', 'engine'],
    skip: ['decision', 'engine'],
    await_human: ['policy'],
    retry: ['engine'],
    reset: ['engine'],
  },
});
