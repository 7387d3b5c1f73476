// How tool calls and approvals map onto seed 004 execution contracts. A table,
// like the machines: each tool-call hop lists the contract moves it makes.
import type { ExecutionTrigger } from '../domain/execution-contract.machine.js';
import type { ToolCallState, ToolCallTrigger } from '../domain/tool-call.machine.js';
import type { ContractMove } from '../store/execution-contracts.js';

const move = (trigger: ExecutionTrigger, actor: string): ContractMove => ({ trigger, actor });

/**
 * Tool call (from state, trigger) → contract moves. A call that needs approval
 * is suspended (WAITING) while a human decides, and resumed once approved, so
 * its consequence carries seed 004's `was_suspended` and reads
 * "(human-confirmed)"; the approval keeps its own `ecs_request` contract.
 * Dispatch and policy checks leave a call pending; a call that never ran is
 * rejected, cancelled or failed.
 */
export const TOOL_CALL_TO_CONTRACT: Readonly<Record<string, readonly ContractMove[]>> = {
  'POLICY_CHECKED:block': [move('reject', 'policy')],
  'POLICY_CHECKED:require_approval': [move('start', 'ecs_node'), move('suspend', 'ecs_node')],
  'WAITING_APPROVAL:approve': [move('resume', 'graph_runner')],
  'WAITING_APPROVAL:reject': [move('reject', 'human')],
  'WAITING_APPROVAL:time_out': [move('cancel', 'system')],
  'DISPATCHED:start': [move('start', 'tool_node')],
  'DISPATCHED:fail': [move('start', 'tool_node'), move('fail', 'tool_node')],
  'DISPATCHED:time_out': [move('start', 'tool_node'), move('fail', 'system')],
  'RUNNING:succeed': [move('succeed', 'tool_node')],
  'RUNNING:fail': [move('fail', 'tool_node')],
  'RUNNING:time_out': [move('fail', 'system')],
};

export const movesOf = (from: ToolCallState, trigger: ToolCallTrigger): readonly ContractMove[] => TOOL_CALL_TO_CONTRACT[`${from}:${trigger}`] ?? [];

/** The approval (human confirmation, seed 004 `ecs_request`): suspended by the ECS node, resumed by the runner. */
export const APPROVAL_TO_CONTRACT: Readonly<Record<'request' | 'approve' | 'reject' | 'expire', readonly ContractMove[]>> = {
  request: [move('start', 'ecs_node'), move('suspend', 'ecs_node')],
  approve: [move('resume', 'graph_runner'), move('succeed', 'graph_runner')],
  reject: [move('reject', 'human')],
  expire: [move('fail', 'system')],
};

const TARGET_KEYS = ['to', 'recipient', 'email', 'target', 'path', 'url', 'account', 'id', 'name', 'query'];

/** A human-readable action summary: `email.send → bob@example.com`. */
export function actionSummary(tool: string, args: Record<string, unknown>): string {
  const key = TARGET_KEYS.find((k) => typeof args[k] === 'string' || typeof args[k] === 'number') ?? Object.keys(args).find((k) => typeof args[k] === 'string');
  if (!key) return tool;
  const target = String(args[key]);
  return `${tool} → ${target.length > 80 ? `${target.slice(0, 79)}…` : target}`;
}
