// Tool calls and approvals (seed 001 §4.3, §4.5, §7.2, §8.2, §8.3). This is the
// only writer of their state: every hop goes through its machine's table and
// commits with its §9 event. Timers are deadline columns swept with SKIP LOCKED.
import { metrics } from '../runtime/metrics.js';
import { canonicalHash } from '../domain/hash.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { isIllegalTransition, writeTransition } from '../store/transition.js';
import { APPROVAL_MACHINE, type ApprovalState, type ApprovalTrigger } from '../domain/approval.machine.js';
import { transition } from '../domain/machine.js';
import { AbcError, invalidRequest, notFound } from '../domain/errors.js';
import { storedError } from '../domain/stored-error.js';
import { decide, verdictRecord, type ScopedVerdict } from '../domain/policy.js';
import { TOOL_CALL_MACHINE, type ToolCallState, type ToolCallTrigger } from '../domain/tool-call.machine.js';
import { runServerTool, schemaProblem, ToolFailure } from '../execution/tool-runner.js';
import type { ToolKinds } from '../execution/tool-kinds.js';
import { InFlight } from '../runtime/in-flight.js';
import { contextInTrace, failSpan, inSpan, traceparentOf, type Span } from '../runtime/tracing.js';
import { newId } from '../runtime/new-id.js';
import type { Logger } from '../runtime/log.js';
import type { EventBus } from '../store/event-bus.js';
import { waitUntil } from '../store/wake-watch.js';
import { appendEvents, type NewEvent } from '../store/event-log.js';
import type { Orm } from '../store/orm.js';
import type { Secrets } from '../access/secrets.js';
import { requireRun, seesRun, speaksFor, type KeyPrincipal, type Principal } from '../access/principal.js';
import type { Presence } from '../store/presence.js';
import type { PolicyStore } from './policy-store.js';
import { findRun, lockRunStatus, transitionRun, transitionRunFrom, type RunFacts, type RunRow } from '../store/run-store.js';
import { RUN_MACHINE } from '../domain/run.machine.js';
import type { ToolRow } from '../store/tool-store.js';
import type { ToolCatalog } from '../store/tool-catalog.js';
import { TtlCache } from '../runtime/ttl-cache.js';
import { moveContractThrough, openContract, summariseOutcome, type ContractMove } from '../store/execution-contracts.js';
import { actionSummary, APPROVAL_TO_CONTRACT, movesOf } from './tool-contracts.js';
import { decisionArg, moveCall, openAndEndCall, openCall, type OpenCall } from './tool-call-commits.js';
import { CallCommitter } from '../store/call-committer.js';
import { poolOf } from '../store/native.js';
import {
  APPROVALS,
  observeApproval,
  claimIdempotencyKey,
  decideCall,
  expiredApprovals,
  insertApproval,
  insertToolCall,
  listApprovals,
  lockCallWithOwner,
  lockOverdueCall,
  orphanCalls,
  overdueCalls,
  readApproval,
  readCallAndRun,
  readIdempotencyKey,
  readToolCall,
  runWaits,
  TOOL_CALLS,
  toCall,
  type ApprovalForDecision,
  type ApprovalKey,
  type ApprovalRow,
  type DecidedRow,
  type RawCall,
  type ToolCallRow,
} from '../store/tool-call-store.js';

export type { ApprovalRow, ToolCallRow };




/** The answer of an invoke (seed 001 §7.2). */
export type InvokeOutcome =
  | { status: 'succeeded'; toolCallId: string; result: unknown }
  | { status: 'pending'; toolCallId: string; reason: 'waiting_approval' | 'waiting_client' | 'running' }
  | { status: 'failed'; toolCallId: string; error: { code: string; message: string } };

/** What running a call needs of its run: its log's keys, its tenant and its trace. */
type CallRun = Pick<RunRow, 'runId' | 'sessionId' | 'tenantId' | 'traceId'>;

export interface ToolCallsOptions {
  orm: Orm;
  bus: EventBus;
  log: Logger;
  policy: PolicyStore;
  presence: Presence;
  /** Every kind of tool this core can call. */
  kinds: ToolKinds;
  /** The tools each tenant sees, as this core last read them. */
  tools: ToolCatalog;
  approvalTimeoutMs: number;
  idempotencyTtlMs: number;
  /** A call's timeout when neither it nor its tool says (TOOL_TIMEOUT_MS). */
  toolTimeoutMs: number;
  /** How long an allowed call of a tool without side effects may run before its open commits alone (ABC_TOOL_START_DEFER_MS). */
  toolStartDeferMs: number;
  /** Connector credentials, resolved in the calling run's tenant. */
  secrets: Secrets;
  /** Decides the approval of a contract's plan step (the engine continues or rejects its ticket). */
  decideStep?: (ticket: string, decision: 'approve' | 'reject', decidedBy: string, reason: string) => Promise<void>;
  /** Refuses a tool its run may not call beyond the policy (a workflow phase's tools): the reason, or null. */
  gate?: (run: RunFacts, tool: string) => Promise<string | null>;
}

/** How a call's tool run ends it: the hop, what it writes and its event. */
interface CallEnd {
  trigger: ToolCallTrigger;
  patch: { result?: unknown; error?: { code: string; message: string } };
  events: NewEvent[];
}

/** An approval an agent's tool call waits on. */
type CallApproval = ApprovalRow & { runId: string; toolCallId: string; argsHash: string | null };

/** The approval as a decision wrote it: as read, with the written state, time, decider and reason. */
function decidedApproval({ argsHash: _hash, decision: _decision, ...read }: ApprovalRow & { argsHash?: string | null; decision?: unknown }, row: DecidedRow): ApprovalRow {
  return { ...read, status: row.status, decidedAt: row.decided_at === null ? null : new Date(row.decided_at), decidedBy: row.decided_by, reason: row.reason };
}

const TERMINAL = new Set<ToolCallState>(TOOL_CALL_MACHINE.terminal);

/** How many runs' facts an invoke keeps (#runFacts), and for how long. */
const RUN_FACTS_KEPT = 10_000;
const RUN_FACTS_KEPT_MS = 10 * 60_000;

// An approvals list's cursor, `<created_at in epoch microseconds>_<approval_id>`, and the key it names.
const approvalCursor = (key: ApprovalKey) => `${key.createdUs}_${key.approvalId}`;
function approvalKeyOf(cursor: string): ApprovalKey {
  const match = /^(\d{1,16})_(.{1,64})$/.exec(cursor);
  if (!match) throw invalidRequest('cursor is not a next_cursor of an approvals list', 'cursor');
  return { createdUs: match[1]!, approvalId: match[2]! };
}

export class ToolCalls {
  readonly #opts: ToolCallsOptions;
  readonly #log: Logger;
  readonly #executing = new InFlight();
  /** Runs' facts by run. */
  readonly #facts = new TtlCache<RunFacts>(RUN_FACTS_KEPT_MS, RUN_FACTS_KEPT);
  /** The one-statement commits of calls, shared by concurrent calls. */
  readonly #committer: CallCommitter;

  constructor(opts: ToolCallsOptions) {
    this.#opts = opts;
    this.#committer = new CallCommitter(poolOf(opts.orm), opts.bus.origin);
    this.#log = opts.log.child({ component: 'tool-calls' });
  }

  #em(): EntityManager {
    return this.#opts.orm.em.fork();
  }

  /** The platform's and tenants' policies: their RPCs store and read them here. */
  get policy(): PolicyStore {
    return this.#opts.policy;
  }

  /** Connector credentials: its RPCs store and list them here. */
  get secrets(): Secrets {
    return this.#opts.secrets;
  }

  /** The kinds of tool this core can call. */
  get kinds(): ToolKinds {
    return this.#opts.kinds;
  }

  /** The tools each tenant sees: registering one over the API has this core read them again at once. */
  get tools(): ToolCatalog {
    return this.#opts.tools;
  }

  /**
   * Creates a call, checks policy and answers: a server tool runs now
   * (succeeded or failed), an approval leaves it pending, a block fails it.
   * The same idempotency key (default `{run}:{tool}:{args hash}`) within the
   * TTL answers with the same call; the same key with other args is a conflict.
   */
  async invoke(principal: Principal | null, req: { toolName: string; runId: string; args: Record<string, unknown>; idempotencyKey?: string; timeoutMs?: number }): Promise<InvokeOutcome> {
    if (!req.runId) throw invalidRequest('run_id is required', 'run_id');
    if (principal?.kind === 'run' && principal.runId !== req.runId) {
      throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: 'a run token may invoke tools only for its own run' });
    }
    const run = await this.#runFacts(req.runId);
    if (!run || !seesRun(principal, run)) throw invalidRequest(`run ${req.runId} not found`, 'run_id');
    const tool = await this.#opts.tools.get(run.tenantId, req.toolName);
    await this.#gate(run, tool.name);
    const problem = schemaProblem(tool.inputSchema, req.args);
    if (problem) throw invalidRequest(`args do not match ${tool.name}'s input schema: ${problem.message}`, problem.field ? `args.${problem.field}` : 'args');
    if (req.timeoutMs !== undefined && (!Number.isInteger(req.timeoutMs) || req.timeoutMs <= 0)) throw invalidRequest('timeout_ms must be a positive integer', 'timeout_ms');

    const hash = canonicalHash({ tool: tool.name, args: req.args });
    const key = req.idempotencyKey || `${req.runId}:${tool.name}:${hash}`;
    const verdict = decide(this.#opts.policy.forTenant(run.tenantId), { tool: tool.name, args: req.args, agentId: run.rootAgentId, permissionLevel: tool.permissionLevel, tenantId: run.tenantId, action: 'tool_call' });
    // An allowed server call opens, is dispatched and starts in one statement, and runs at once.
    const traceparent = traceparentOf() ?? null;
    const ran = verdict.decision === 'allow' && !this.kinds.clientSide(tool.kind) ? await this.#openAndRun(run, tool, this.#opening(tool, req, key, hash, verdict, traceparent)) : undefined;
    if (ran) return this.outcome(ran);
    // A held call of a run without a parent (whose contract would mirror the pause) opens with its approval in one statement.
    const held = verdict.decision === 'require_approval' && !run.parentRunId ? await this.#hold(run, tool, this.#opening(tool, req, key, hash, verdict, traceparent), verdict.reason) : undefined;
    if (held) return this.outcome(held);
    const created = await this.#em().transactional(async (tx) => {
      const existing = await this.#claimKey(tx, key, hash);
      if (existing) return { call: existing, fresh: false };
      return { call: await this.#create(tx, { sessionId: run.sessionId, tenantId: run.tenantId }, tool, req, key, verdict), fresh: true };
    });
    if (created.fresh && created.call.status === 'DISPATCHED' && !this.kinds.clientSide(tool.kind)) await this.#execute(created.call.toolCallId, tool);
    return this.outcome((await this.get(created.call.toolCallId)));
  }

  /**
   * Runs an allowed server call: opened through the hops #create and #execute
   * make, to RUNNING, in one statement with the key's claim, then run and
   * ended. The call as its end left it; undefined when the open wrote nothing
   * (see openCall), and the call goes the transactional way. A tool without
   * side effects runs first: when it ends within toolStartDeferMs, its open
   * and its end commit together; a crash before then leaves no trace, and the
   * caller's retry runs it again, which only such a tool may. Otherwise its
   * open commits while it runs.
   */
  async #openAndRun(run: RunFacts, tool: ToolRow, opening: OpenCall): Promise<ToolCallRow | undefined> {
    const traceparent = opening.traceparent;
    const open = async () => (await this.#opts.bus.deliver(run, () => openCall(this.#committer, opening)))?.call;
    if (tool.sideEffect || this.#opts.toolStartDeferMs <= 0) {
      const opened = await open();
      return opened && ((await this.#runInSpan(opened, tool, run, traceparent)) ?? (await this.get(opened.toolCallId)));
    }
    return this.#inSpan(opening.toolCallId, opening.runId, tool, run, traceparent, async (span) => {
      const running = this.#callTool(opening.toolCallId, opening.runId, opening.args, opening.timeoutMs, run, tool, span);
      let timer: NodeJS.Timeout | undefined;
      const early = await Promise.race([running, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), this.#opts.toolStartDeferMs)))]);
      clearTimeout(timer);
      if (early) {
        const both = await this.#opts.bus.deliver(run, () => openAndEndCall(this.#committer, opening, { hop: { trigger: early.trigger, events: early.events }, patch: early.patch }));
        return both && this.#counted(both.call);
      }
      const opened = await open();
      return opened && ((await this.#end(opened.toolCallId, run, opened, await running)) ?? (await this.get(opened.toolCallId)));
    });
  }

  /**
   * Opens a call that policy holds for approval: through `policy_checked` and
   * `require_approval`, with its approval and the run's pause, in one
   * statement (HeldCall). Undefined when nothing was written, as openCall:
   * the transactional path then decides.
   */
  async #hold(run: RunFacts, tool: ToolRow, opening: OpenCall, reason: string): Promise<ToolCallRow | undefined> {
    const id = opening.toolCallId;
    const approvalId = newId('ap');
    const summary = summarize(tool.name, opening.args);
    const expiresAt = new Date(Date.now() + this.#opts.approvalTimeoutMs);
    const held: OpenCall = {
      ...opening,
      hops: [opening.hops[0]!, { trigger: 'require_approval', events: [approvalCreated(approvalId, id, tool.name, summary, reason, expiresAt)] }],
      approval: {
        approvalId,
        summary,
        argsHash: canonicalHash(opening.args),
        expiresAt,
        timeoutSeconds: Math.ceil(this.#opts.approvalTimeoutMs / 1000),
        pause: pausedFor(approvalId, id),
      },
    };
    return (await this.#opts.bus.deliver(run, () => openCall(this.#committer, held)))?.call;
  }

  /** An allowed server call's open through its first hops, to RUNNING. */
  #opening(
    tool: ToolRow,
    req: { runId: string; args: Record<string, unknown>; timeoutMs?: number },
    key: string,
    hash: string,
    verdict: ScopedVerdict,
    traceparent: string | null,
  ): OpenCall {
    const id = newId('tc');
    const timeoutMs = req.timeoutMs ?? tool.timeoutMs;
    return {
      toolCallId: id,
      runId: req.runId,
      toolName: tool.name,
      kind: tool.kind,
      args: req.args,
      idempotencyKey: key,
      hash,
      ttlMs: this.#opts.idempotencyTtlMs,
      timeoutMs,
      traceparent,
      contract: { actionSummary: actionSummary(tool.name, req.args), irreversible: tool.sideEffect, timeoutSeconds: Math.ceil(timeoutMs / 1000) },
      created: [createdEvent(id, tool, req.args, key)],
      hops: [
        { trigger: 'policy_checked', events: [policyEvent(id, verdict)] },
        { trigger: 'dispatch', events: [{ type: 'tool_dispatched', payload: { tool_call_id: id, kind: tool.kind } }] },
        { trigger: 'start' },
      ],
    };
  }

  /**
   * A run's facts, read once: they never change. Its state does, and the
   * statements that act on the run check it (an ended run opens no call).
   */
  async #runFacts(runId: string): Promise<RunFacts | undefined> {
    const kept = this.#facts.get(runId);
    if (kept) return kept.value;
    // A run that does not exist is not kept: any id may be asked for.
    const run = await findRun(this.#em(), runId);
    if (!run) return undefined;
    const facts: RunFacts = { runId, sessionId: run.sessionId, rootAgentId: run.rootAgentId, parentRunId: run.parentRunId, traceId: run.traceId, userId: run.userId, tenantId: run.tenantId };
    this.#facts.set(runId, facts);
    return facts;
  }

  /** A tool the run may not call is refused before any call exists, and the refusal recorded on the run. */
  async #gate(run: RunFacts, tool: string): Promise<void> {
    const reason = await this.#opts.gate?.(run, tool);
    if (!reason) return;
    const details = { tool, rule_id: 'workflow_phase' };
    await this.#em().transactional((tx) => appendEvents(tx, run.runId, [{ type: 'policy_decision', payload: { action: 'tool_call', decision: 'block', code: 'blocked', reason, ...details } }]));
    throw new AbcError('PERMISSION_DENIED', { code: 'blocked', category: 'COMPLIANCE', message: reason, details });
  }

  /** The invoke answer for a call in its current state. */
  outcome(call: ToolCallRow): InvokeOutcome {
    if (call.status === 'SUCCEEDED') return { status: 'succeeded', toolCallId: call.toolCallId, result: call.result };
    if (TERMINAL.has(call.status)) return { status: 'failed', toolCallId: call.toolCallId, error: call.error ?? { code: 'tool_failed', message: call.status } };
    const reason = call.status === 'WAITING_APPROVAL' ? 'waiting_approval' : this.kinds.clientSide(call.kind) ? 'waiting_client' : 'running';
    return { status: 'pending', toolCallId: call.toolCallId, reason };
  }

  /**
   * Claims `key` for this request, or returns the call first made with it.
   * The insert waits for a concurrent claimant to commit, so two racing invokes
   * with one key make one call. An expired key is claimed afresh; a different
   * request under a live key is a conflict.
   */
  async #claimKey(tx: EntityManager, key: string, hash: string): Promise<ToolCallRow | null> {
    if (await claimIdempotencyKey(tx, 'tool_call', key, hash, this.#opts.idempotencyTtlMs)) return null;
    const row = await readIdempotencyKey<{ tool_call_id: string }>(tx, 'tool_call', key);
    if (row!.request_hash !== hash) {
      throw new AbcError('ALREADY_EXISTS', {
        code: 'idempotency_conflict',
        category: 'VALIDATION',
        retryable: false,
        message: `idempotency key ${key} was used for a different request`,
        details: { idempotency_key: key },
      });
    }
    return this.get(row!.response.tool_call_id, tx);
  }

  async #create(
    tx: EntityManager,
    { sessionId, tenantId }: { sessionId: string; tenantId: string },
    tool: ToolRow,
    req: { runId: string; args: Record<string, unknown>; timeoutMs?: number },
    key: string,
    verdict: ScopedVerdict,
  ): Promise<ToolCallRow> {
    const id = newId('tc');
    const timeoutMs = req.timeoutMs ?? tool.timeoutMs;
    await insertToolCall(tx, { toolCallId: id, runId: req.runId, toolName: tool.name, kind: tool.kind, args: req.args, idempotencyKey: key, timeoutMs, traceparent: traceparentOf() });
    await openContract(tx, {
      sessionId,
      runId: req.runId,
      subjectId: id,
      actionType: 'tool_call',
      actionSummary: actionSummary(tool.name, req.args),
      irreversible: tool.sideEffect,
      idempotencyKey: key,
      timeoutSeconds: Math.ceil(timeoutMs / 1000),
    });
    // The call's first moves go to the log in one append.
    const collect: NewEvent[] = [createdEvent(id, tool, req.args, key)];
    const flush = () => appendEvents(tx, req.runId, collect.splice(0));
    await this.#transition(tx, id, 'policy_checked', [policyEvent(id, verdict)], {}, collect);
    if (verdict.decision === 'block') {
      const error = { code: 'blocked', message: `blocked by policy: ${verdict.reason}` };
      const blocked = await this.#transition(tx, id, 'block', [{ type: 'tool_result', payload: { tool_call_id: id, status: 'failed', error } }], { error }, collect);
      await flush();
      return blocked;
    }
    if (verdict.decision === 'require_approval') return this.#requestApproval(tx, id, sessionId, tenantId, tool, req.runId, req.args, verdict.reason, collect);
    const dispatched = await this.#transition(tx, id, 'dispatch', [{ type: 'tool_dispatched', payload: { tool_call_id: id, kind: tool.kind } }], { deadlineMs: timeoutMs }, collect);
    await flush();
    return this.kinds.clientSide(tool.kind) ? this.#sendToClient(tx, dispatched, sessionId) : dispatched;
  }

  /**
   * Sends a client tool call to the session's clients as `tool_request`, and
   * pauses the run; with no client connected anywhere it fails at once with
   * `client_offline` (seed 001 §11).
   */
  async #sendToClient(tx: EntityManager, call: ToolCallRow, sessionId: string): Promise<ToolCallRow> {
    const online = await this.#opts.presence.online(sessionId);
    if (call.status === 'APPROVED') {
      const dispatched = { type: 'tool_dispatched', payload: { tool_call_id: call.toolCallId, kind: 'client', after_approval: true } };
      call = await this.#transition(tx, call.toolCallId, 'start', [dispatched], { started: true, deadlineMs: call.timeoutMs ?? this.#opts.toolTimeoutMs });
    }
    if (!online) {
      const error = { code: 'client_offline', message: 'no client of the session is connected to run this client tool' };
      return this.#transition(tx, call.toolCallId, 'fail', [{ type: 'tool_result', payload: { tool_call_id: call.toolCallId, kind: 'client', status: 'failed', error } }], {
        error,
        completed: true,
      });
    }
    const deadline = call.deadlineAt?.getTime() ?? Date.now() + (call.timeoutMs ?? this.#opts.toolTimeoutMs);
    const request: NewEvent = {
      type: 'tool_request',
      payload: { tool_call_id: call.toolCallId, tool_name: call.toolName, args: call.args, deadline_ts: deadline },
    };
    const running = call.status === 'RUNNING' ? (await appendEvents(tx, call.runId, [request]), call) : await this.#transition(tx, call.toolCallId, 'start', [request], { started: true });
    const run = (await findRun(tx, call.runId))!;
    if (run.status === 'RUNNING') {
      await transitionRun(tx, this.#log, call.runId, 'wait_tool', [
        { type: 'run_state', payload: { from: 'RUNNING', to: 'PAUSED_WAITING_TOOL', detail: { tool_call_id: call.toolCallId } } },
      ]);
    }
    return running;
  }

  /**
   * Completes a client tool call with the client's `tool_result`. Only a call
   * that is waiting for its client accepts one; the result must fit the tool's
   * output schema. It comes from a key of the call's tenant speaking for the
   * call's user (`userId`, or any user the key speaks for when null).
   */
  async submitResult(principal: KeyPrincipal, userId: string | null, res: { toolCallId: string; ok: boolean; result: unknown; errorMessage: string }): Promise<ToolCallRow> {
    return this.#em().transactional(async (tx) => {
      const row = await lockCallWithOwner(tx, res.toolCallId);
      if (!row || row.tenant_id !== principal.tenantId || !speaksFor(principal, row.owner)) throw notFound('tool_call', res.toolCallId);
      if (userId !== null && row.owner !== userId) throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: `tool call ${res.toolCallId} belongs to another user's session` });
      if (!this.kinds.clientSide(row.kind)) throw new AbcError('FAILED_PRECONDITION', { code: 'not_a_client_tool', message: `${row.tool_name} is not a client tool` });
      if (row.status !== 'RUNNING') {
        throw new AbcError('FAILED_PRECONDITION', { code: 'tool_call_finished', message: `tool call ${res.toolCallId} is ${row.status}, not waiting for a result` });
      }
      const tool = await this.#opts.tools.get(row.tenant_id, row.tool_name);
      const problem = res.ok ? schemaProblem(tool.outputSchema, res.result) : null;
      const error = !res.ok
        ? { code: 'tool_failed', message: res.errorMessage || 'the client reported a failure' }
        : problem
          ? { code: 'invalid_output', message: `the client's result breaks the output schema: ${problem.message}` }
          : null;
      const call = error
        ? await this.#transition(tx, res.toolCallId, 'fail', [{ type: 'tool_result', payload: { tool_call_id: res.toolCallId, kind: 'client', status: 'failed', error } }], { error, completed: true })
        : await this.#transition(tx, res.toolCallId, 'succeed', [{ type: 'tool_result', payload: { tool_call_id: res.toolCallId, kind: 'client', status: 'succeeded', result: res.result } }], {
            result: res.result,
            completed: true,
          });
      await this.#resumeIfIdle(tx, row.run_id, { tool_call_id: res.toolCallId });
      return call;
    });
  }

  /**
   * Resumes a paused run once nothing it waits for is pending. `pending`, the
   * events of the moves before it in `tx`, go to the log first, in the same append.
   */
  async #resumeIfIdle(tx: EntityManager, runId: string, detail: Record<string, unknown>, pending: NewEvent[] = []): Promise<void> {
    const run = (await runWaits(tx, runId, this.kinds.clientKinds()))!;
    // Not resuming: the moves' events still go to the log.
    const stay = async () => {
      if (pending.length) await appendEvents(tx, runId, pending);
    };
    if (run.status !== 'PAUSED_WAITING_APPROVAL' && run.status !== 'PAUSED_WAITING_TOOL') return stay();
    if (run.calls > 0) return stay();
    // Seed 004 alignment: resuming expects no execution contract of the run still waiting.
    const waiting = run.contracts;
    const warning: NewEvent[] = waiting
      ? [{ type: 'execution_alignment_warning', payload: { expected_waiting: 0, actual_waiting: waiting, detail } }]
      : [];
    if (waiting) this.#log.warn({ runId, waiting }, 'resuming a run whose execution contracts still wait');
    const resumed = [...pending, ...warning, { type: 'run_state', payload: { from: run.status, to: 'RUNNING', detail } }];
    // Its callers hold the run's row (locked, or written by their append), so it is in the state read: one statement from it.
    // Should it not be, the locking read decides, as a move of a run always has.
    if (!(await transitionRunFrom(tx, this.#log, runId, run.status, 'resume', resumed))) await transitionRun(tx, this.#log, runId, 'resume', resumed);
  }

  /** Holds a call for approval; `collect`, the events of its hops so far, goes to the log with this one's, in one append. */
  async #requestApproval(
    tx: EntityManager,
    id: string,
    sessionId: string,
    tenantId: string,
    tool: ToolRow,
    runId: string,
    args: Record<string, unknown>,
    reason: string,
    collect: NewEvent[],
  ): Promise<ToolCallRow> {
    const approvalId = newId('ap');
    const summary = summarize(tool.name, args);
    const approval = await insertApproval(tx, { approvalId, runId, toolCallId: id, sessionId, tenantId, summary, argsHash: canonicalHash(args), timeoutMs: this.#opts.approvalTimeoutMs });
    await openContract(tx, {
      sessionId,
      runId,
      subjectId: approvalId,
      actionType: 'ecs_request',
      actionSummary: `confirm ${summary}`,
      irreversible: false,
      timeoutSeconds: Math.ceil(this.#opts.approvalTimeoutMs / 1000),
    });
    collect.push(...(await contractMoves(tx, { runId, subjectId: approvalId }, APPROVAL_TO_CONTRACT.request)));
    const call = await this.#transition(tx, id, 'require_approval', [approvalCreated(approvalId, id, tool.name, summary, reason, approval.expires_at)], { approvalId }, collect);
    // A running run pauses for the approval; one already paused (another call's approval) or ended only records it.
    const paused = await transitionRunFrom(tx, this.#log, runId, 'RUNNING', 'wait_approval', [...collect, pausedFor(approvalId, id)]);
    if (!paused) await appendEvents(tx, runId, collect);
    collect.splice(0);
    return call;
  }

  /** Runs a DISPATCHED or APPROVED server call exactly once: the start transition is the claim. */
  async #execute(toolCallId: string, tool?: ToolRow): Promise<void> {
    // Read first, as a prepared statement: the start's move, from the state read here, is the claim.
    const current = await readCallAndRun(this.#em(), toolCallId);
    if (!current) throw notFound('tool_call', toolCallId);
    const run: CallRun = current;
    const traceparent = current.traceparent;
    // An approved call whose run ended meanwhile (cancelled, failed) must not act on the world.
    const ended = RUN_MACHINE.isTerminal(current.runStatus);
    // Seed 004 resume alignment: an irreversible action whose key already completed never runs twice.
    const done = ended ? undefined : (current.doneElsewhere ?? undefined);
    // An approved call is dispatched only now (seed 001 §9.1): say so in the log.
    const dispatched = current.status === 'APPROVED' ? [{ type: 'tool_dispatched', payload: { tool_call_id: toolCallId, kind: current.kind, after_approval: true } }] : [];
    // The start, in one statement from the state read; a call that moved on meanwhile takes the transactional way, which decides.
    const start = { toolCallId, runId: current.runId, from: current.status, hop: { trigger: 'start' as const, events: dispatched }, patch: {} };
    const moved = !ended && !done ? await this.#opts.bus.deliver(run, () => moveCall(this.#committer, start)) : undefined;
    const started =
      moved?.call ??
      (await this.#em()
        .transactional(async (tx) => {
          if (!ended && !done) return this.#transition(tx, toolCallId, 'start', dispatched, { started: true, from: current.status });
          const error = ended
            ? { code: 'run_ended', message: `run ${current.runId} ended (${current.runStatus}) before this call could start` }
            : { code: 'already_completed', message: `an irreversible action with this idempotency key already completed (${done})` };
          if (current.status === 'APPROVED') await this.#transition(tx, toolCallId, 'start', [], { started: true });
          await this.#transition(tx, toolCallId, 'fail', [{ type: 'tool_result', payload: { tool_call_id: toolCallId, status: 'failed', error } }], { error, completed: true });
          return null;
        })
        .catch((error) => {
          if (isIllegalTransition(error)) return null; // another core has it
          throw error;
        }));
    if (!started) return;
    const definition = tool ?? (await this.#opts.tools.get(run.tenantId, started.toolName));
    await this.#runInSpan(started, definition, run, traceparent);
  }

  /** Runs a started call in the run's trace: under the invoking call, or (after an approval) on its own. The call as its end wrote it. */
  #runInSpan(started: ToolCallRow, definition: ToolRow, run: CallRun, traceparent: string | null): Promise<ToolCallRow | undefined> {
    return this.#inSpan(started.toolCallId, started.runId, definition, run, traceparent, async (span) =>
      this.#end(started.toolCallId, run, started, await this.#callTool(started.toolCallId, started.runId, started.args, started.timeoutMs ?? definition.timeoutMs, run, definition, span)),
    );
  }

  /** `fn` in a span of the call's execution, in the run's trace. */
  #inSpan<T>(toolCallId: string, runId: string, definition: ToolRow, run: CallRun, traceparent: string | null, fn: (span: Span) => Promise<T>): Promise<T> {
    return inSpan(`execute_tool ${definition.name}`, {
      parent: contextInTrace(run.traceId, traceparent),
      attributes: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': definition.name,
        'gen_ai.tool.call.id': toolCallId,
        'gen_ai.tool.type': 'extension',
        'abc.tool.kind': definition.kind,
        'abc.run.id': runId,
      },
    }, fn);
  }

  /** Runs a call's tool: the hop that ends the call, with its event and what it writes. Never throws. */
  async #callTool(toolCallId: string, runId: string, args: Record<string, unknown>, timeoutMs: number, run: CallRun, definition: ToolRow, span: Span): Promise<CallEnd> {
    try {
      const result = await runServerTool(this.kinds, {
        tool: definition,
        args,
        toolCallId,
        runId,
        timeoutMs,
        secret: (ref) => this.#opts.secrets.resolve(run.tenantId, ref),
        traceparent: traceparentOf(),
      });
      return { trigger: 'succeed', patch: { result }, events: [{ type: 'tool_result', payload: { tool_call_id: toolCallId, status: 'succeeded', result } }] };
    } catch (error) {
      const failure = error instanceof ToolFailure ? error : new ToolFailure('tool_failed', (error as Error).message);
      failSpan(span, failure, { 'error.type': failure.code });
      const timedOut = failure.code === 'tool_timeout';
      const patch = { error: { code: failure.code, message: failure.message } };
      return { trigger: timedOut ? 'time_out' : 'fail', patch, events: [{ type: 'tool_result', payload: { tool_call_id: toolCallId, status: timedOut ? 'timeout' : 'failed', ...patch } }] };
    }
  }

  /** Records a started call's end (a deadline that fired first stands); the call as written. */
  async #end(toolCallId: string, run: CallRun, started: ToolCallRow, end: CallEnd): Promise<ToolCallRow | undefined> {
    const { trigger, patch, events } = end;
    const move = { toolCallId, runId: started.runId, from: started.status, hop: { trigger, events }, patch };
    const moved = await this.#opts.bus.deliver(run, () => moveCall(this.#committer, move));
    if (moved) return this.#counted(moved.call);
    return this.#em()
      .transactional((tx) => this.#transition(tx, toolCallId, trigger, events, { ...patch, completed: true }))
      .catch((error) => {
        // The deadline sweeper timed the call out first; its verdict stands.
        if (isIllegalTransition(error)) return undefined;
        throw error;
      });
  }

  /**
   * Decides an approval. Only the session's user may; the first decision wins
   * and any later one is a conflict. Approving runs the tool (once); rejecting
   * fails the call with `rejected`. Either way the run resumes.
   */
  async decide(approvalId: string, decision: 'approve' | 'reject', principal: KeyPrincipal, userId: string, reason: string): Promise<ApprovalRow> {
    const found = await readApproval(this.#em(), approvalId, { decision: true });
    // Another tenant's approval, or one of a user the key does not speak for, does not exist for it.
    const visible = found && found.tenantId === principal.tenantId && (found.userId === null ? principal.userIds === null : speaksFor(principal, found.userId));
    if (!visible) throw notFound('approval', approvalId);
    if (found.ticket) {
      // A contract's plan step: the engine answers the ticket's human request, which settles the approval with it.
      if (!this.#opts.decideStep) throw notFound('approval', approvalId);
      if (found.status !== 'PENDING') {
        throw new AbcError('ABORTED', { code: 'approval_conflict', category: 'VALIDATION', retryable: false, message: `approval ${approvalId} is already ${found.status}` });
      }
      await this.#opts.decideStep(found.ticket, decision, `user:${userId}`, reason);
      return this.approval(approvalId);
    }
    const decided =
      (await this.#decideAtOnce(found as CallApproval & { decision: ApprovalForDecision }, decision, principal, userId, reason)) ??
      (await this.#decideInTransaction(approvalId, decision, principal, userId, reason));
    const { call } = decided;
    if (call.status === 'APPROVED') {
      this.#background(() => (this.kinds.clientSide(call.kind) ? this.#sendApprovedToClient(call.toolCallId) : this.#execute(call.toolCallId)));
    }
    return decided.approval;
  }

  /** A decision move by move, under the approval's lock: it refuses, withdraws or settles, as the approval, its call and its run now are. */
  async #decideInTransaction(approvalId: string, decision: 'approve' | 'reject', principal: KeyPrincipal, userId: string, reason: string): Promise<{ call: ToolCallRow; approval: ApprovalRow }> {
    const outcome = await this.#em().transactional(async (tx) => {
      const approval = (await this.#lockApproval(tx, approvalId)) as CallApproval & { decision: ApprovalForDecision };
      const refused = decisionRefused(approval, principal, userId);
      if (refused) throw refused;
      const { run } = approval.decision;
      // A run that ended (cancelled, failed) withdraws its open approvals: nothing may act for it any more.
      if (run && RUN_MACHINE.isTerminal(run.status) && approval.status === 'PENDING') {
        await this.#settle(tx, approval, 'expire', 'system', `run ${run.runId} ended (${run.status}) before a decision`, run);
        return { withdrawn: run };
      }
      return { withdrawn: undefined, ...(await this.#settle(tx, approval, decision, `user:${userId}`, reason, run ?? undefined)) };
    });
    if (outcome.withdrawn) {
      const { runId, status } = outcome.withdrawn;
      throw new AbcError('FAILED_PRECONDITION', { code: 'run_ended', message: `run ${runId} has ended (${status}); approval ${approvalId} was withdrawn`, details: { run_id: runId, status } });
    }
    return { call: outcome.call!, approval: outcome.approval! };
  }

  /**
   * A decision in one statement (decideCall), decided from the approval as
   * read with what a decision checks: the approval as written; undefined,
   * with nothing written, when the read does not allow it here (the
   * transactional path then refuses or withdraws, as it decides) or when a
   * row was no longer as read.
   */
  async #decideAtOnce(
    approval: CallApproval & { decision: ApprovalForDecision },
    decision: 'approve' | 'reject',
    principal: KeyPrincipal,
    userId: string,
    reason: string,
  ): Promise<{ call: ToolCallRow; approval: ApprovalRow } | undefined> {
    const { callArgs, run } = approval.decision;
    if (approval.status !== 'PENDING' || !run || run.parentRunId || RUN_MACHINE.isTerminal(run.status) || !callArgs) return undefined;
    if (decisionRefused(approval, principal, userId)) return undefined;
    const decidedBy = `user:${userId}`;
    const settled = settlement(approval, decision, decidedBy, reason);
    const arg = decisionArg({
      approvalId: approval.approvalId,
      toolCallId: approval.toolCallId,
      runId: run.runId,
      trigger: decision,
      decidedBy,
      reason,
      to: settled.status,
      args: callArgs,
      runStatus: run.status,
      clientKinds: this.kinds.clientKinds(),
      events: settled.events,
      ...(settled.error && { error: settled.error }),
      outcome: settled.outcome,
      detail: { approval_id: approval.approvalId, decision },
    });
    if (!arg) return undefined;
    const written = await this.#opts.bus.deliver({ runId: run.runId, sessionId: approval.sessionId }, (origin) => decideCall(this.#em(), arg, origin));
    if (!written) return undefined;
    observeApproval(written.approval, written.approval.status, run.traceId, decidedBy);
    return { call: this.#counted(written.call), approval: decidedApproval(approval, written.approval) };
  }

  /** Applies a decision (or expiry) to an approval, its call and its run (read here unless given), in `tx`: the call and the approval as written. */
  async #settle(
    tx: EntityManager,
    approval: CallApproval,
    decision: 'approve' | 'reject' | 'expire',
    decidedBy: string,
    reason: string,
    run?: { traceId: string },
  ): Promise<{ call: ToolCallRow; approval: ApprovalRow }> {
    let moved;
    try {
      moved = await writeTransition<ApprovalState, ApprovalTrigger, DecidedRow>(tx, APPROVALS, decision as ApprovalTrigger, {
        columns: 'approval_id, status, created_at',
        where: 'approval_id = ?',
        params: [approval.approvalId],
        set: () => ({ sql: ['decided_at = now()', 'decided_by = ?', 'reason = ?', 'version = version + 1'], params: [decidedBy, reason || null] }),
        // The approval was read locked: its move goes in one statement from the state read.
        oneStatement: true,
        from: approval.status,
        returning: true,
      });
    } catch (error) {
      if (!isIllegalTransition(error)) throw error;
      this.#log.warn({ approvalId: approval.approvalId, decision }, 'illegal approval transition rejected');
      // The decision lost to another: the caller sees which, as a conflict.
      throw new AbcError('ABORTED', {
        code: 'approval_conflict',
        category: 'VALIDATION',
        retryable: false,
        message: `approval ${approval.approvalId} is already ${approval.status}`,
        details: { ...(error as AbcError).payload.details },
      });
    }
    if (!moved) throw notFound('approval', approval.approvalId);
    observeApproval(moved.row, moved.to, (run ?? (await findRun(tx, approval.runId)))?.traceId ?? '', decidedBy);
    const settled = settlement(approval, decision, decidedBy, reason);
    // The moves' events go to the log in one append, with the run's resume when it resumes.
    const collect = await contractMoves(tx, { runId: approval.runId, subjectId: approval.approvalId }, APPROVAL_TO_CONTRACT[decision], settled.outcome);
    const call = await this.#transition(tx, approval.toolCallId, settled.trigger, settled.events, settled.error ? { error: settled.error, completed: true } : {}, collect);
    // Its events are not appended yet, so the run's row is not yet this transaction's: taken before the count of what
    // still holds the run, it makes two decisions of one run take turns, and the second count sees the first's call decided.
    await lockRunStatus(tx, approval.runId);
    await this.#resumeIfIdle(tx, approval.runId, { approval_id: approval.approvalId, decision }, collect);
    return { call, approval: decidedApproval(approval, moved.after!) };
  }

  async #sendApprovedToClient(toolCallId: string): Promise<void> {
    await this.#em().transactional(async (tx) => {
      const call = await this.get(toolCallId, tx);
      const run = (await findRun(tx, call.runId))!;
      await this.#sendToClient(tx, call, run.sessionId);
    });
  }

  /** The approval, locked, with what a decision checks. */
  async #lockApproval(tx: EntityManager, approvalId: string): Promise<ApprovalRow & { argsHash: string | null; decision?: ApprovalForDecision }> {
    const row = await readApproval(tx, approvalId, { lock: true, decision: true });
    if (!row) throw notFound('approval', approvalId);
    return row;
  }

  async approval(approvalId: string): Promise<ApprovalRow> {
    const row = await readApproval(this.#em(), approvalId);
    if (!row) throw notFound('approval', approvalId);
    return row;
  }

  /**
   * A page of the caller's approvals, oldest first: its tenant's, of the users
   * its key speaks for, or its own run's. `cursor` is a `nextCursor` of the same list.
   */
  async listApprovals(
    principal: Principal,
    filter: { sessionId?: string; runId?: string; ticket?: string; status?: ApprovalState },
    page: { limit: number; cursor: string },
  ): Promise<{ approvals: ApprovalRow[]; hasMore: boolean; nextCursor: string }> {
    // With no filter, a key reads its tenant's inbox: tool calls' and contract steps' approvals alike.
    if (principal.kind === 'run' && filter.sessionId !== principal.sessionId && filter.runId !== principal.runId) {
      throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: 'a run token lists only the approvals of its own run or session' });
    }
    const after = page.cursor ? approvalKeyOf(page.cursor) : undefined;
    const found = await listApprovals(this.#em(), principal.tenantId, { ...filter, userIds: principal.kind === 'key' ? principal.userIds : null }, { after, limit: page.limit });
    return { approvals: found.approvals, hasMore: found.hasMore, nextCursor: found.last ? approvalCursor(found.last) : page.cursor };
  }

  /** A tool call the caller may see; another tenant's does not exist for it. */
  async visible(principal: Principal | null, toolCallId: string): Promise<ToolCallRow> {
    const call = await this.get(toolCallId);
    requireRun(principal, await findRun(this.#em(), call.runId), toolCallId, 'tool_call');
    return call;
  }

  async get(toolCallId: string, em: EntityManager = this.#em()): Promise<ToolCallRow> {
    const row = await readToolCall(em, toolCallId);
    if (!row) throw notFound('tool_call', toolCallId);
    return row;
  }

  /**
   * Waits up to `timeoutMs` for the call to end, woken by its run's events;
   * never polls in a loop. `call` is its id, or the call as its caller just
   * read it (it is read again once the wait listens, so no end is missed).
   */
  async wait(call: string | ToolCallRow, timeoutMs: number, signal: AbortSignal): Promise<ToolCallRow> {
    const seen = typeof call === 'string' ? await this.get(call) : call;
    if (TERMINAL.has(seen.status)) return seen;
    return waitUntil(this.#opts.bus, `run:${seen.runId}`, () => this.get(seen.toolCallId), (c) => TERMINAL.has(c.status), Date.now() + timeoutMs, signal);
  }

  /**
   * The durable timers, safe on any number of cores: expired approvals, calls
   * past their deadline, and calls whose executor was lost before starting them.
   */
  async sweep(): Promise<void> {
    for (const id of await expiredApprovals(this.#em())) {
      await this.#em()
        .transactional(async (tx) => {
          const row = await readApproval(tx, id, { lock: true, pendingOnly: true });
          if (row) await this.#settle(tx, row as CallApproval, 'expire', 'system', 'approval timed out');
        })
        .catch((error) => this.#log.error({ err: error, approvalId: id }, 'approval expiry failed'));
    }
    for (const id of await overdueCalls(this.#em())) {
      const error = { code: 'tool_timeout', message: 'the tool call passed its deadline' };
      await this.#em()
        .transactional(async (tx) => {
          if (!(await lockOverdueCall(tx, id))) return;
          const kind = (await this.get(id, tx)).kind;
          const call = await this.#transition(tx, id, 'time_out', [{ type: 'tool_result', payload: { tool_call_id: id, kind, status: 'timeout', error } }], { error, completed: true });
          await this.#resumeIfIdle(tx, call.runId, { tool_call_id: id, timeout: true });
        })
        .catch((e) => this.#log.error({ err: e, toolCallId: id }, 'tool timeout failed'));
    }
    // Calls whose executor died before starting them: approved ones, and server calls
    // left DISPATCHED. Starting is the claim, so a call still being started elsewhere is safe.
    for (const id of await orphanCalls(this.#em(), this.kinds.clientKinds())) {
      const call = await this.get(id);
      this.#background(() => (this.kinds.clientSide(call.kind) ? this.#sendApprovedToClient(id) : this.#execute(id)));
    }
  }

  /** Waits up to `graceMs` for tool executions started in the background; what is still running then is left to the sweep. */
  async close(graceMs: number): Promise<void> {
    const stuck = await this.#executing.drain(graceMs);
    if (stuck.length) this.#log.warn({ executions: stuck.length }, 'tool executions still going at shutdown: left to the sweep');
  }

  #background(work: () => Promise<void>): void {
    void this.#executing.track(work().catch((error) => this.#log.error({ err: error }, 'tool execution failed')));
  }

  /** Counts a call that ended, by its tool and outcome. */
  #counted(call: ToolCallRow): ToolCallRow {
    if (TERMINAL.has(call.status)) metrics.toolCalls.inc({ tool: call.toolName, outcome: call.status.toLowerCase() });
    return call;
  }

  /**
   * The one writer of a tool call's state: applies the machine's table under a
   * row lock, records the patch and the events, and wakes waiters, in `tx`.
   * With `collect`, the events go there instead, for the caller to append
   * with others of the same transaction (as `transitionStep` does).
   */
  async #transition(
    tx: EntityManager,
    toolCallId: string,
    trigger: ToolCallTrigger,
    events: NewEvent[],
    patch: {
      result?: unknown;
      error?: { code: string; message: string };
      approvalId?: string;
      started?: boolean;
      completed?: boolean;
      deadlineMs?: number;
      /** The state the call was just read in: the move goes in one statement from it (a call that moved on meanwhile takes the locking read). */
      from?: ToolCallState;
    } = {},
    collect?: NewEvent[],
  ): Promise<ToolCallRow> {
    let moved;
    try {
      moved = await writeTransition<ToolCallState, ToolCallTrigger, RawCall>(tx, TOOL_CALLS, trigger, {
        where: 'tool_call_id = ?',
        params: [toolCallId],
        set: ({ to }) => ({
          sql: [
            'version = version + 1',
            'result = CASE WHEN ? THEN ?::jsonb ELSE result END',
            'error = COALESCE(?::jsonb, error)',
            'approval_id = COALESCE(?, approval_id)',
            'started_at = CASE WHEN ? THEN now() ELSE started_at END',
            'completed_at = CASE WHEN ? THEN now() ELSE completed_at END',
            "deadline_at = CASE WHEN ?::int IS NULL THEN deadline_at ELSE now() + (?::int * interval '1 millisecond') END",
          ],
          params: [
            'result' in patch,
            JSON.stringify(patch.result ?? null),
            patch.error ? JSON.stringify(storedError(patch.error)) : null,
            patch.approvalId ?? null,
            patch.started ?? false,
            patch.completed ?? TOOL_CALL_MACHINE.isTerminal(to),
            patch.deadlineMs ?? null,
            patch.deadlineMs ?? null,
          ],
        }),
        returning: true,
        oneStatement: true,
        ...(patch.from && { from: patch.from }),
      });
    } catch (error) {
      if (isIllegalTransition(error)) this.#log.warn({ toolCallId, trigger }, 'illegal tool call transition rejected');
      throw error;
    }
    if (!moved) throw notFound('tool_call', toolCallId);
    const row = { status: moved.from, run_id: moved.row.run_id };
    const next = { value: moved.to };
    this.#counted(toCall(moved.after!));
    const outcome = next.value === 'SUCCEEDED' ? { result: summariseOutcome(patch.result ?? null) } : patch.error ? { errorMessage: patch.error.message } : {};
    const mirrored = await contractMoves(tx, { runId: row.run_id, subjectId: toolCallId }, movesOf(row.status, trigger), outcome);
    // Every hop is visible in the log, and wakes waiters through the run's notification.
    const logged = [...events, { type: 'tool_call_state', payload: { tool_call_id: toolCallId, from: row.status, to: next.value, trigger } }, ...mirrored];
    if (collect) collect.push(...logged);
    else await appendEvents(tx, row.run_id, logged);
    return toCall(moved.after!);
  }
}

/** Applies contract moves in `tx`, in one statement; returns their `execution_state` events. */
async function contractMoves(
  tx: EntityManager,
  where: { runId: string; subjectId: string },
  moves: readonly ContractMove[],
  outcome: { result?: string; errorMessage?: string } = {},
): Promise<NewEvent[]> {
  return (await moveContractThrough(tx, where, moves, outcome)).map((state) => ({ type: 'execution_state', payload: { ...state } }));
}

const approvalCreated = (approvalId: string, id: string, tool: string, summary: string, reason: string, expiresAt: Date | string): NewEvent => ({
  type: 'approval_created',
  payload: { approval_id: approvalId, tool_call_id: id, tool_name: tool, args_summary: summary, reason, expires_at: new Date(expiresAt).getTime() },
});

/**
 * What a decision (or expiry) of a pending approval writes beside the
 * approval's move: its state, the call's hop with its events (and a
 * rejection's error), and what the approval's contract keeps.
 */
function settlement(approval: CallApproval, decision: 'approve' | 'reject' | 'expire', decidedBy: string, reason: string) {
  const next = transition(APPROVAL_MACHINE, 'PENDING', decision);
  if (!next.ok) throw new Error(`approval machine: PENDING refuses ${decision}`);
  const status = next.value;
  const decided: NewEvent = {
    type: 'approval_decision',
    payload: { approval_id: approval.approvalId, tool_call_id: approval.toolCallId, decision, status, decided_by: decidedBy, reason: reason || null },
  };
  if (decision === 'approve') return { status, trigger: 'approve' as const, events: [decided], outcome: { result: `approved by ${decidedBy}` } };
  const error = rejection(decision);
  const failed: NewEvent = { type: 'tool_result', payload: { tool_call_id: approval.toolCallId, status: 'failed', error } };
  return { status, trigger: decision === 'reject' ? ('reject' as const) : ('time_out' as const), events: [decided, failed], error, outcome: { errorMessage: error.message } };
}

/** Why `userId` may not decide the approval as read (the error to answer), or undefined when it may. */
function decisionRefused(approval: CallApproval & { decision: ApprovalForDecision }, principal: KeyPrincipal, userId: string): AbcError | undefined {
  const { callArgs, sessionUserId } = approval.decision;
  if (sessionUserId === null || sessionUserId !== userId || !speaksFor(principal, userId)) {
    return new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: `only the user of session ${approval.sessionId} may decide this approval` });
  }
  if (!callArgs) return notFound('tool_call', approval.toolCallId);
  if (canonicalHash(callArgs) !== approval.argsHash) {
    return new AbcError('FAILED_PRECONDITION', { code: 'approval_args_mismatch', message: 'the call no longer has the arguments this approval was for' });
  }
  return undefined;
}

/** The run's pause for an approval. */
const pausedFor = (approvalId: string, id: string): NewEvent => ({
  type: 'run_state',
  payload: { from: 'RUNNING', to: 'PAUSED_WAITING_APPROVAL', detail: { approval_id: approvalId, tool_call_id: id } },
});

const createdEvent = (id: string, tool: ToolRow, args: Record<string, unknown>, key: string): NewEvent => ({
  type: 'tool_call_created',
  payload: { tool_call_id: id, tool_name: tool.name, kind: tool.kind, args, idempotency_key: key },
});

const policyEvent = (id: string, verdict: ScopedVerdict): NewEvent => ({
  type: 'policy_decision',
  payload: { tool_call_id: id, decision: verdict.decision, reason: verdict.reason, ...verdictRecord(verdict) },
});

function rejection(decision: 'reject' | 'expire'): { code: string; message: string } {
  return decision === 'reject' ? { code: 'rejected', message: 'the approval was rejected' } : { code: 'approval_timeout', message: 'nobody decided the approval in time' };
}

/** A one-line summary for the approver: `payments.transfer(amount: 100, to: "x")`, cut at 200 characters. */
export function summarize(tool: string, args: Record<string, unknown>): string {
  const parts = Object.entries(args).map(([k, v]) => `${k}: ${JSON.stringify(v)}`);
  const text = `${tool}(${parts.join(', ')})`;
  return text.length > 200 ? `${text.slice(0, 197)}...` : text;
}
