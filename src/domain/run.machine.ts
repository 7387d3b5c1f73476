// The run state machine of seed 001 §8.1.
import { defineMachine } from './machine.js';

export const RUN_STATES = [
  'CREATED', 'RUNNING', 'PAUSED_WAITING_TOOL', 'PAUSED_WAITING_APPROVAL', 'DONE', 'FAILED', 'CANCELLED',
] as const;
export type RunState = (typeof RUN_STATES)[number];
export type RunTrigger = 'start' | 'wait_tool' | 'wait_approval' | 'resume' | 'complete' | 'fail' | 'cancel';

export const RUN_MACHINE = defineMachine<RunState, RunTrigger>({
  name: 'run',
  initial: 'CREATED',
  states: RUN_STATES,
  transitions: {
    CREATED: { start: 'RUNNING' },
    RUNNING: { wait_tool: 'PAUSED_WAITING_TOOL', wait_approval: 'PAUSED_WAITING_APPROVAL', complete: 'DONE', fail: 'FAILED', cancel: 'CANCELLED' },
    PAUSED_WAITING_TOOL: { resume: 'RUNNING', fail: 'FAILED', cancel: 'CANCELLED' },
    PAUSED_WAITING_APPROVAL: { resume: 'RUNNING', fail: 'FAILED', cancel: 'CANCELLED' },
    DONE: {},
    FAILED: {},
    CANCELLED: {},
  },
  actors: {
    start: ['orchestrator'],
    wait_tool: ['orchestrator'],
    wait_approval: ['orchestrator'],
    resume: ['orchestrator', 'human'],
    complete: ['agent'],
    fail: ['agent', 'orchestrator'],
    cancel: ['human', 'orchestrator'],
  },
  resumable: ['PAUSED_WAITING_TOOL', 'PAUSED_WAITING_APPROVAL'],
});
