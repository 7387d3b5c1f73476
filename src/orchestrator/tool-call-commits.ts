// A tool call's commits in one call each: opening a call through its first
// hops (or through its end, for a call that ended before it was written), and
// a later hop. The hops are decided here, the call's by its
// machine's transition() and its execution contract's by the table in
// tool-contracts.ts; then one statement (abc_open_tool_call or
// abc_move_tool_call, migration tool_call_commit_functions) writes the call,
// the contract with a transition record per hop (and the fact of a terminal
// one) and the run's events, in the next of the committer's shared commits. A row in another state than the hops start from
// makes that statement write nothing: the caller then takes the move-by-move
// path in a transaction, which decides and fails as it always has.
import { actorCategory, EXECUTION_CONTRACT_MACHINE, type ExecutionState } from '../domain/execution-contract.machine.js';
import { transition } from '../domain/machine.js';
import type { ApprovalState } from '../domain/approval.machine.js';
import { RUN_MACHINE, type RunState } from '../domain/run.machine.js';
import { storedError } from '../domain/stored-error.js';
import { TOOL_CALL_MACHINE, type ToolCallState, type ToolCallTrigger } from '../domain/tool-call.machine.js';
import { newId } from '../runtime/new-id.js';
import { EVENTS_CHANNEL, appendArgs, type NewEvent } from '../store/event-log.js';
import { moveFacts, moveTime, summariseOutcome, type ContractMove } from '../store/execution-contracts.js';
import type { CallCommitter } from '../store/call-committer.js';
import type { CallCommit } from '../store/tool-call-store.js';
import { APPROVAL_TO_CONTRACT, movesOf } from './tool-contracts.js';

/** A hop of a call, with the events logged before its `tool_call_state`. */
export interface CallHop {
  trigger: ToolCallTrigger;
  events?: NewEvent[];
}

export interface OpenCall {
  toolCallId: string;
  runId: string;
  toolName: string;
  kind: string;
  args: Record<string, unknown>;
  idempotencyKey: string;
  /** The request's hash, claimed with the key for `ttlMs`. */
  hash: string;
  ttlMs: number;
  timeoutMs: number;
  traceparent: string | null;
  contract: { actionSummary: string; irreversible: boolean; timeoutSeconds: number };
  /** `tool_call_created` and the like, logged first. */
  created: NewEvent[];
  /** The hops from CREATED; the last one's state is written. */
  hops: CallHop[];
  /** A call held for approval: the approval written with it (its hops end with `require_approval`). */
  approval?: HeldCall;
}

/** The approval of a held call, and the pause of its run. */
export interface HeldCall {
  approvalId: string;
  summary: string;
  argsHash: string;
  expiresAt: Date;
  timeoutSeconds: number;
  /** The run's pause, logged last, and only if the run was running: `run_state`. */
  pause: NewEvent;
}

export interface MoveCall {
  toolCallId: string;
  runId: string;
  /** The call's state as last committed. */
  from: ToolCallState;
  hop: CallHop;
  patch: { result?: unknown; error?: { code: string; message: string } };
}

/** The contract's state while its call is in a state, where the one-call path knows it. */
const CONTRACT_STATE_OF: Partial<Record<ToolCallState, ExecutionState>> = { CREATED: 'pending', POLICY_CHECKED: 'pending', DISPATCHED: 'pending', APPROVED: 'running', RUNNING: 'running' };

/**
 * Opens a call through `hops` in one statement, with the key's claim: the row
 * as written and the events appended, or undefined when nothing was written (a
 * live claim of the key, a run that ended, an irreversible action of the key
 * that completed).
 */
export async function openCall(committer: CallCommitter, c: OpenCall): Promise<CallCommit | undefined> {
  const open = openCallArg(c);
  return open && committer.commit({ open });
}

/**
 * abc_open_tool_call's argument for `c`; undefined for hops the machines
 * refuse. With `end`, the patch of a last hop to a terminal state: the call,
 * its contract (with its fact) and every event are written ended at once.
 */
export function openCallArg(c: OpenCall, end?: MoveCall['patch']): Record<string, unknown> | undefined {
  const created = moveTime();
  const held = c.approval && heldArg(c.approval);
  if (c.approval && (!held || c.hops.at(-1)?.trigger !== 'require_approval')) return undefined;
  // The approval's contract moves as the call is held: its events go before `approval_created`.
  const hops = held ? c.hops.map((h, i) => (i === c.hops.length - 1 ? { ...h, events: [...held.events, ...(h.events ?? [])] } : h)) : c.hops;
  const path = pathOf('CREATED', c.toolCallId, hops, 'pending');
  if (!path) return undefined;
  if (end && !TOOL_CALL_MACHINE.isTerminal(path.to)) return undefined;
  const executionId = newId('exe');
  // The call's contract's events; the approval's carry their own contract's id.
  const contractEvents = path.events.map((e) =>
    e.type === 'execution_state' && !('execution_id' in (e.payload ?? {}))
      ? { ...e, payload: { ...e.payload, execution_id: executionId, action_summary: c.contract.actionSummary.slice(0, 500), has_side_effects: c.contract.irreversible } }
      : e,
  );
  const { input, wanted } = appendArgs([{ runId: c.runId, events: [...c.created, ...contractEvents, ...(c.approval ? [c.approval.pause] : [])], onlyIfActive: false }]);
  return {
    call: {
      tool_call_id: c.toolCallId, run_id: c.runId, tool_name: c.toolName, kind: c.kind, status: path.to, args: c.args, idempotency_key: c.idempotencyKey,
      timeout_ms: c.timeoutMs, traceparent: c.traceparent, hops: c.hops.length, started: c.hops.some((h) => h.trigger === 'start'),
      ...(c.hops.some((h) => h.trigger === 'dispatch') && { deadline_ms: c.timeoutMs }),
      ...(end && { completed: true, ...('result' in end && { result: end.result ?? null }), ...(end.error && { error: storedError(end.error) }) }),
    },
    hash: c.hash,
    ttl_ms: c.ttlMs,
    ended: RUN_MACHINE.terminal,
    contract: {
      execution_id: executionId, action_summary: c.contract.actionSummary.slice(0, 500), irreversible: c.contract.irreversible, timeout_seconds: c.contract.timeoutSeconds,
      status: path.contract.to, created_at: created.toISOString(), at: (path.contract.at ?? created).toISOString(), hops: path.contract.hops,
      ...(end && EXECUTION_CONTRACT_MACHINE.isTerminal(path.contract.to) && { terminal: true, fact_id: newId('mem'), ...outcomeOf(path.to, end) }),
    },
    ...(held && { approval: held.arg }),
    events: input,
    wanted,
    channel: EVENTS_CHANNEL,
    // Answer the events with only what the database assigned them (migration numbered_call_events).
    numbered: true,
  };
}

/**
 * abc_open_tool_call's `approval` (migration held_call_opens): the approval,
 * its contract through APPROVAL_TO_CONTRACT.request with those moves' events,
 * and the run's pause; undefined for a move a machine refuses.
 */
function heldArg(a: HeldCall) {
  const opened = moveTime();
  const moved = contractPath('pending', APPROVAL_TO_CONTRACT.request);
  const pause = transition(RUN_MACHINE, 'RUNNING', 'wait_approval');
  if (!moved || !pause.ok) return undefined;
  const executionId = newId('exe');
  const actionSummary = `confirm ${a.summary}`.slice(0, 500);
  return {
    arg: {
      approval_id: a.approvalId, args_summary: a.summary, args_hash: a.argsHash, expires_at: a.expiresAt.toISOString(),
      contract: { execution_id: executionId, action_summary: actionSummary, timeout_seconds: a.timeoutSeconds, status: moved.to, created_at: opened.toISOString(), at: moved.at!.toISOString(), hops: moved.hops },
      pause: { from: 'RUNNING', to: pause.value },
    },
    events: moved.events.map((e) => ({ ...e, payload: { ...e.payload, execution_id: executionId, action_summary: actionSummary, has_side_effects: false } })),
  };
}

/**
 * Opens a call through its hops to RUNNING and ends it by `end` in one
 * statement and one commit: a call of a tool without side effects that ran
 * before either was written. The call and its contract are written in their
 * last states, with every hop's transition records and events. Undefined when
 * nothing was written, as openCall.
 */
export async function openAndEndCall(committer: CallCommitter, c: OpenCall, end: Pick<MoveCall, 'hop' | 'patch'>): Promise<CallCommit | undefined> {
  const open = openCallArg({ ...c, hops: [...c.hops, end.hop] }, end.patch);
  return open && committer.commit({ open });
}

/** Moves a call by one hop in one statement: as openCall. */
export async function moveCall(committer: CallCommitter, m: MoveCall): Promise<CallCommit | undefined> {
  const move = moveCallArg(m);
  return move && committer.commit({ move });
}

/** abc_move_tool_call's argument for `m`; undefined for a hop the machines refuse. */
export function moveCallArg(m: MoveCall): Record<string, unknown> | undefined {
  const from = CONTRACT_STATE_OF[m.from];
  const path = from && pathOf(m.from, m.toolCallId, [m.hop], from);
  if (!path) return undefined;
  const { input, wanted } = appendArgs([{ runId: m.runId, events: path.events, onlyIfActive: false }]);
  return {
    tool_call_id: m.toolCallId,
    from: m.from,
    to: path.to,
    ...('result' in m.patch && { result: m.patch.result ?? null }),
    ...(m.patch.error && { error: storedError(m.patch.error) }),
    started: m.hop.trigger === 'start',
    completed: TOOL_CALL_MACHINE.isTerminal(path.to),
    ...(path.contract.hops.length && { contract: contractArg(from, path.contract, outcomeOf(path.to, m.patch)) }),
    events: input,
    wanted,
    channel: EVENTS_CHANNEL,
    numbered: true,
  };
}

/** A decision on a held call's approval, decided from what was read: see decisionArg. */
export interface CallDecision {
  approvalId: string;
  toolCallId: string;
  runId: string;
  trigger: 'approve' | 'reject';
  decidedBy: string;
  reason: string;
  /** The approval's move. */
  to: ApprovalState;
  /** The call's arguments as read: the human was shown them. */
  args: Record<string, unknown>;
  /** The run's state as read: a paused run resumes when nothing else holds it. */
  runStatus: RunState;
  clientKinds: string[];
  /** Logged before the call's `tool_call_state`: its `approval_decision`, and a rejection's `tool_result`. */
  events: NewEvent[];
  /** A rejection's error, on the call. */
  error?: { code: string; message: string };
  /** What the approval's contract keeps of the decision. */
  outcome: { result?: string; errorMessage?: string };
  /** The resume's `run_state` detail. */
  detail: Record<string, unknown>;
}

/**
 * abc_decide_call's argument (migration decide_call_function): the approval's
 * move, the call's, both contracts' moves by their tables, and the run's
 * resume with its `run_state`, logged last and only if the run resumes;
 * undefined for a move a machine refuses.
 */
export function decisionArg(d: CallDecision): Record<string, unknown> | undefined {
  const held = contractPath('waiting', APPROVAL_TO_CONTRACT[d.trigger]);
  const call = pathOf('WAITING_APPROVAL', d.toolCallId, [{ trigger: d.trigger, events: d.events }], 'waiting');
  const resume = d.runStatus === 'PAUSED_WAITING_APPROVAL' || d.runStatus === 'PAUSED_WAITING_TOOL' ? transition(RUN_MACHINE, d.runStatus, 'resume') : undefined;
  if (!held || !call || (resume && !resume.ok)) return undefined;
  const resumed: NewEvent[] = resume?.ok ? [{ type: 'run_state', payload: { from: d.runStatus, to: resume.value, detail: d.detail } }] : [];
  const { input } = appendArgs([{ runId: d.runId, events: [...held.events, ...call.events, ...resumed], onlyIfActive: false }]);
  return {
    approval_id: d.approvalId, from: 'PENDING', to: d.to, decided_by: d.decidedBy, reason: d.reason || null,
    call: { from: 'WAITING_APPROVAL', to: call.to, args: d.args, ...(d.error && { error: storedError(d.error) }), completed: TOOL_CALL_MACHINE.isTerminal(call.to) },
    run_status: d.runStatus,
    approval_contract: contractArg('waiting', held, { result: d.outcome.result, error_message: d.outcome.errorMessage }),
    call_contract: contractArg('waiting', call.contract, outcomeOf(call.to, d)),
    ...(resume?.ok && { resume: { to: resume.value, client_kinds: d.clientKinds } }),
    approval_events: input.slice(0, held.events.length),
    events: input.slice(held.events.length, held.events.length + call.events.length),
    resume_events: input.slice(held.events.length + call.events.length),
    channel: EVENTS_CHANNEL,
  };
}

/** What a contract keeps of its subject's end. */
export type ContractOutcome = { result?: string; error_message?: string };

/** What a contract keeps of its call's end. */
function outcomeOf(to: ToolCallState, patch: MoveCall['patch']): ContractOutcome {
  return { ...(to === 'SUCCEEDED' && { result: summariseOutcome(patch.result ?? null) }), ...(patch.error && { error_message: patch.error.message }) };
}

/** abc_move_contract's argument: a contract's moves from `from` (with the fact of a terminal one) and what it keeps of them. */
function contractArg(from: ExecutionState, path: { to: ExecutionState; at?: Date; hops: Record<string, unknown>[] }, outcome: ContractOutcome) {
  return { from, to: path.to, at: path.at!.toISOString(), hops: path.hops, terminal: EXECUTION_CONTRACT_MACHINE.isTerminal(path.to), fact_id: newId('mem'), ...outcome };
}

/** The hops by the machines' tables with their events, as the move-by-move writer logs them; undefined for a hop it refuses. */
function pathOf(from: ToolCallState, toolCallId: string, hops: CallHop[], contractFrom: ExecutionState) {
  const events: NewEvent[] = [];
  const contractHops: Record<string, unknown>[] = [];
  let state = from;
  let contract = contractFrom;
  let at: Date | undefined;
  for (const hop of hops) {
    const next = transition(TOOL_CALL_MACHINE, state, hop.trigger);
    if (!next.ok) return undefined;
    events.push(...(hop.events ?? []), { type: 'tool_call_state', payload: { tool_call_id: toolCallId, from: state, to: next.value, trigger: hop.trigger } });
    const moved = contractPath(contract, movesOf(state, hop.trigger), contractHops.length);
    if (!moved) return undefined;
    contractHops.push(...moved.hops);
    events.push(...moved.events);
    contract = moved.to;
    at = moved.at ?? at;
    state = next.value;
  }
  return { to: state, events, contract: { to: contract, at, hops: contractHops } };
}

/**
 * A contract's moves from `from` by its machine's table: a transition record
 * per hop (numbered on from `before`) and its `execution_state` event, to
 * which the statement adds the contract's id, summary and side effects (and a
 * fact's error); undefined for a move the table refuses.
 */
function contractPath(from: ExecutionState, moves: readonly ContractMove[], before = 0) {
  const hops: Record<string, unknown>[] = [];
  const events: NewEvent[] = [];
  let state = from;
  let at: Date | undefined;
  for (const move of moves) {
    const moved = transition(EXECUTION_CONTRACT_MACHINE, state, move.trigger);
    if (!moved.ok) return undefined;
    at = moveTime();
    hops.push({ n: before + hops.length + 1, from_status: state, to_status: moved.value, trigger: move.trigger, actor: move.actor, actor_category: actorCategory(move.actor), ts: at.toISOString() });
    events.push({ type: 'execution_state', payload: moveFacts(state, moved.value, move.trigger, move.actor, at) });
    state = moved.value;
  }
  return { to: state, at, hops, events };
}
