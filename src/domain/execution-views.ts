// Seed 004 observation views: pure projections of an execution contract and its
// transitions. Timestamps are seconds since the epoch (floats), durations are
// milliseconds, as in the seed.
import { EXECUTION_CONTRACT_MACHINE, type ExecutionState } from './execution-contract.machine.js';

export { actorCategory, ACTOR_CATEGORY_MAP } from './execution-contract.machine.js';

export interface ContractRow {
  execution_id: string;
  session_id: string;
  run_id: string | null;
  action_type: string;
  action_summary: string;
  status: ExecutionState;
  irreversible: boolean;
  idempotency_key: string | null;
  timeout_seconds: number | null;
  result: string | null;
  error_message: string | null;
  created_at: Date | string;
  entered_at: Date | string;
}

export interface TransitionRow {
  execution_id: string;
  sequence_number: number;
  from_status: ExecutionState;
  to_status: ExecutionState;
  trigger: string;
  actor: string;
  actor_category: string;
  ts: Date | string;
}

const STATUS_TO_CONSEQUENCE: Record<ExecutionState, string> = {
  completed: 'SUCCESS',
  failed: 'FAILED',
  rejected: 'REJECTED',
  cancelled: 'CANCELLED',
  waiting: 'WAITING',
  running: 'IN_PROGRESS',
  pending: 'NOT_STARTED',
};

const millis = (d: Date | string) => (typeof d === 'string' ? Date.parse(d) : d.getTime());
const seconds = (d: Date | string) => millis(d) / 1000;
const isTerminal = (s: ExecutionState) => EXECUTION_CONTRACT_MACHINE.isTerminal(s);
const isResumable = (s: ExecutionState) => (EXECUTION_CONTRACT_MACHINE.resumable ?? []).includes(s);

export interface ExecutionSnapshot {
  execution_id: string;
  action_type: string;
  action_summary: string;
  current_status: ExecutionState;
  entered_at: number;
  duration_in_state_ms: number;
  is_terminal: boolean;
  is_stable: boolean;
  is_resumable: boolean;
  has_side_effects: boolean;
  irreversible: boolean;
  idempotency_key: string | null;
  timeout_seconds: number | null;
  result: string | null;
  error_message: string | null;
  transition_count: number;
  last_actor: string | null;
  last_trigger: string | null;
  session_id: string;
  run_id: string | null;
  created_at: number;
}

/** `transitions` are this contract's, in sequence order. */
export function snapshot(c: ContractRow, transitions: TransitionRow[], nowMs: number): ExecutionSnapshot {
  const last = transitions.at(-1);
  const terminal = isTerminal(c.status);
  const entered = millis(c.entered_at);
  return {
    execution_id: c.execution_id,
    action_type: c.action_type,
    action_summary: c.action_summary,
    current_status: c.status,
    entered_at: entered / 1000,
    duration_in_state_ms: Math.max(0, nowMs - entered),
    is_terminal: terminal,
    is_stable: terminal || isResumable(c.status),
    is_resumable: isResumable(c.status),
    has_side_effects: c.irreversible,
    irreversible: c.irreversible,
    idempotency_key: c.idempotency_key,
    timeout_seconds: c.timeout_seconds,
    result: terminal ? c.result : null,
    error_message: terminal ? c.error_message : null,
    transition_count: transitions.length,
    last_actor: last?.actor ?? null,
    last_trigger: last?.trigger ?? null,
    session_id: c.session_id,
    run_id: c.run_id,
    created_at: seconds(c.created_at),
  };
}

/** Seed 004's TransitionRecord: a stored transition, with epoch-second time and whether it ended the contract. */
export type TransitionRecord = Omit<TransitionRow, 'ts'> & { timestamp: number; is_terminal_transition: boolean };

export const transitionRecord = (t: TransitionRow): TransitionRecord => ({
  execution_id: t.execution_id,
  sequence_number: t.sequence_number,
  from_status: t.from_status,
  to_status: t.to_status,
  trigger: t.trigger,
  actor: t.actor,
  actor_category: t.actor_category,
  timestamp: seconds(t.ts),
  is_terminal_transition: isTerminal(t.to_status),
});

export interface ExecutionTimeline {
  session_id: string;
  contracts: ExecutionSnapshot[];
  transitions: TransitionRecord[];
  total_contracts: number;
  terminal_contracts: number;
  active_contracts: number;
  has_suspended: boolean;
  has_irreversible_completed: boolean;
  started_at: number | null;
  ended_at: number | null;
}

// The views are built first and sorted by the times they carry: a comparator
// that parses dates parses each one about log n times.
export function timeline(sessionId: string, contracts: ContractRow[], transitions: TransitionRow[], nowMs: number): ExecutionTimeline {
  const byContract = groupBy(transitions);
  const ordered = contracts.map((c) => snapshot(c, byContract.get(c.execution_id) ?? [], nowMs)).sort((a, b) => a.created_at - b.created_at);
  const terminal = ordered.filter((c) => c.is_terminal);
  const allTerminal = ordered.length > 0 && terminal.length === ordered.length;
  return {
    session_id: sessionId,
    contracts: ordered,
    transitions: transitions.map(transitionRecord).sort((a, b) => a.timestamp - b.timestamp || a.sequence_number - b.sequence_number),
    total_contracts: ordered.length,
    terminal_contracts: terminal.length,
    active_contracts: ordered.filter((c) => c.current_status === 'pending' || c.current_status === 'running' || c.current_status === 'waiting').length,
    has_suspended: ordered.some((c) => c.current_status === 'waiting'),
    has_irreversible_completed: ordered.some((c) => c.irreversible && c.current_status === 'completed'),
    started_at: ordered[0]?.created_at ?? null,
    // Not Math.max(...list): a session's contracts can outnumber a call's arguments.
    ended_at: allTerminal ? terminal.reduce((latest, c) => Math.max(latest, c.entered_at), -Infinity) : null,
  };
}

export interface ExecutionConsequenceView {
  execution_id: string;
  action_type: string;
  action_summary: string;
  consequence_label: string;
  result: string | null;
  error_message: string | null;
  has_side_effects: boolean;
  was_suspended: boolean;
  is_still_pending: boolean;
  total_duration_ms: number | null;
}

/** What happened in the world. Never carries idempotency keys, raw action details or secrets. */
export function consequenceView(c: ContractRow, transitions: TransitionRow[]): ExecutionConsequenceView {
  const terminal = isTerminal(c.status);
  return {
    execution_id: c.execution_id,
    action_type: c.action_type,
    action_summary: c.action_summary,
    consequence_label: STATUS_TO_CONSEQUENCE[c.status],
    result: c.status === 'completed' ? c.result : null,
    error_message: terminal && c.status !== 'completed' ? c.error_message : null,
    has_side_effects: c.irreversible && c.status === 'completed',
    was_suspended: transitions.some((t) => t.to_status === 'waiting'),
    is_still_pending: !terminal,
    total_duration_ms: terminal ? Math.max(0, millis(c.entered_at) - millis(c.created_at)) : null,
  };
}

export function consequenceViews(contracts: ContractRow[], transitions: TransitionRow[]): ExecutionConsequenceView[] {
  const byContract = groupBy(transitions);
  return contracts
    .map((c) => ({ view: consequenceView(c, byContract.get(c.execution_id) ?? []), at: millis(c.created_at) }))
    .sort((a, b) => a.at - b.at)
    .map((x) => x.view);
}

/**
 * The seed's prompt text (`_build_tool_result_from_consequences`), one line per
 * finished action: `[SUCCESS ⚠️ IRREVERSIBLE (human-confirmed)] email.send → bob@example.com: sent`.
 */
export function renderConsequences(views: ExecutionConsequenceView[], actionTypes: readonly string[] = ['tool_call']): string {
  const lines: string[] = [];
  for (const cv of views) {
    if (!actionTypes.includes(cv.action_type)) continue;
    const label = cv.consequence_label;
    const sideEffect = cv.has_side_effects ? ' ⚠️ IRREVERSIBLE' : '';
    const suspended = cv.was_suspended ? ' (human-confirmed)' : '';
    if (label === 'SUCCESS') lines.push(`[${label}${sideEffect}${suspended}] ${cv.action_summary}: ${cv.result ?? ''}`);
    else if (label === 'FAILED' || label === 'REJECTED' || label === 'CANCELLED') lines.push(`[${label}] ${cv.action_summary}: ${cv.error_message ?? ''}`);
  }
  return lines.join('\n');
}

/** Seed 004 `execution_fact`: the memory record of a contract that reached a terminal state. */
export function executionFact(c: ContractRow, transitions: TransitionRow[]): Record<string, unknown> {
  const last = transitions.at(-1);
  return {
    type: 'execution_fact',
    execution_id: c.execution_id,
    action_type: c.action_type,
    action_summary: c.action_summary,
    final_status: c.status,
    irreversible: c.irreversible,
    duration_ms: last ? millis(last.ts) - millis(c.created_at) : 0,
    result_summary: c.result ? c.result.slice(0, 200) : null,
    error_summary: c.error_message ? c.error_message.slice(0, 200) : null,
  };
}

function groupBy(transitions: TransitionRow[]): Map<string, TransitionRow[]> {
  const map = new Map<string, TransitionRow[]>();
  for (const t of [...transitions].sort((a, b) => a.sequence_number - b.sequence_number)) {
    const list = map.get(t.execution_id) ?? [];
    list.push(t);
    map.set(t.execution_id, list);
  }
  return map;
}
