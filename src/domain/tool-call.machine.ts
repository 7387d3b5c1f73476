// The tool call state machine of seed 001 §8.2. Only SUCCEEDED lets a run continue past the call.
import { defineMachine } from './machine.js';

export const TOOL_CALL_STATES = [
  'CREATED', 'POLICY_CHECKED', 'BLOCKED', 'WAITING_APPROVAL', 'APPROVED', 'REJECTED', 'DISPATCHED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'TIMEOUT',
] as const;
export type ToolCallState = (typeof TOOL_CALL_STATES)[number];
export type ToolCallTrigger =
  | 'policy_checked' | 'block' | 'require_approval' | 'approve' | 'reject' | 'dispatch' | 'start' | 'succeed' | 'fail' | 'time_out';

export const TOOL_CALL_MACHINE = defineMachine<ToolCallState, ToolCallTrigger>({
  name: 'tool_call',
  initial: 'CREATED',
  states: TOOL_CALL_STATES,
  transitions: {
    CREATED: { policy_checked: 'POLICY_CHECKED' },
    POLICY_CHECKED: { block: 'BLOCKED', require_approval: 'WAITING_APPROVAL', dispatch: 'DISPATCHED' },
    BLOCKED: {},
    // An approval nobody decided in time is a timeout, not a human rejection.
    WAITING_APPROVAL: { approve: 'APPROVED', reject: 'REJECTED', time_out: 'TIMEOUT' },
    APPROVED: { start: 'RUNNING' },
    REJECTED: {},
    DISPATCHED: { start: 'RUNNING', fail: 'FAILED', time_out: 'TIMEOUT' },
    RUNNING: { succeed: 'SUCCEEDED', fail: 'FAILED', time_out: 'TIMEOUT' },
    SUCCEEDED: {},
    FAILED: {},
    TIMEOUT: {},
  },
  actors: {
    policy_checked: ['policy'],
    block: ['policy'],
    require_approval: ['policy'],
    approve: ['human'],
    reject: ['human'],
    dispatch: ['orchestrator'],
    start: ['tool', 'client'],
    succeed: ['tool', 'client'],
    fail: ['tool', 'client', 'orchestrator'],
    time_out: ['system'],
  },
  resumable: ['WAITING_APPROVAL', 'DISPATCHED', 'RUNNING'],
});
