// The execution contract state machine of seed 004: every tracked action
// (tool call, human confirmation, contract step, agent call) moves through it.
import { defineMachine } from './machine.js';

export const EXECUTION_STATES = ['pending', 'running', 'waiting', 'completed', 'failed', 'rejected', 'cancelled'] as const;
export type ExecutionState = (typeof EXECUTION_STATES)[number];
export type ExecutionTrigger = 'start' | 'suspend' | 'resume' | 'succeed' | 'fail' | 'reject' | 'cancel';

export const EXECUTION_CONTRACT_MACHINE = defineMachine<ExecutionState, ExecutionTrigger>({
  name: 'execution_contract',
  initial: 'pending',
  states: EXECUTION_STATES,
  transitions: {
    pending: { start: 'running', reject: 'rejected', cancel: 'cancelled' },
    running: { suspend: 'waiting', succeed: 'completed', fail: 'failed', cancel: 'cancelled' },
    waiting: { resume: 'running', reject: 'rejected', fail: 'failed', cancel: 'cancelled' },
    completed: {},
    failed: {},
    rejected: {},
    cancelled: {},
  },
  actors: {
    start: ['tool_node', 'ecs_node', 'graph_runner'],
    suspend: ['tool_node', 'ecs_node'],
    resume: ['graph_runner', 'human'],
    succeed: ['tool_node', 'ecs_node', 'graph_runner'],
    fail: ['tool_node', 'ecs_node', 'graph_runner'],
    reject: ['human', 'policy'],
    cancel: ['human', 'graph_runner'],
  },
  resumable: ['waiting'],
});

/** Seed 004 actor categories; an actor not in the map is `system`. */
export const ACTOR_CATEGORY_MAP: Readonly<Record<string, string>> = {
  tool_node: 'tool',
  ecs_node: 'system',
  graph_runner: 'system',
  reasoning: 'agent',
  human: 'human',
};

export const actorCategory = (actor: string) => ACTOR_CATEGORY_MAP[actor] ?? 'system';
