// Runs: start, execute against the agent, cancel, read, watch (seed 001 §4.1, §6, §8.1).
import { randomBytes } from 'node:crypto';
import { hashToken, newRunToken } from '../access/run-tokens.js';
import type { Secrets } from '../access/secrets.js';
import { isUniqueViolation } from '../store/orm.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { RetryPolicy } from '../domain/backoff.js';
import { AbcError, invalidRequest, notFound } from '../domain/errors.js';
import { RUN_MACHINE, type RunState } from '../domain/run.machine.js';
import { AgentFault, invokeAgent } from '../execution/agent-client.js';
import type { BuiltinAgents } from '../ports/builtin-agent.js';
import { InFlight } from '../runtime/in-flight.js';
import { newId } from '../runtime/new-id.js';
import { context as otel, contextInTrace, contextOf, failSpan, SpanKind, startSpan, traceIdOf, traceparentOf, trace, untraced, type Context } from '../runtime/tracing.js';
import { openContract } from '../store/execution-contracts.js';
import type { Logger } from '../runtime/log.js';
import type { EventBus } from '../store/event-bus.js';
import type { EventAppender } from '../store/event-appender.js';
import { appendEvents, type StoredEvent } from '../store/event-log.js';
import { decide, verdictRecord, type PolicySet } from '../domain/policy.js';
import { ALLOW_ALL } from './policy-store.js';
import type { Orm } from '../store/orm.js';
import { watchEvents } from '../store/event-watch.js';
import { poolOf } from '../store/native.js';
import { getAgent, invocableAgent, type AgentRow } from './agents.js';
import { retryWhileUnavailable } from '../store/outage.js';
import { EventWriter } from './event-writer.js';
import {
  activeChildren,
  ancestorRuns,
  claimOrphanRuns,
  completeRun,
  findRun,
  countLiveRuns,
  findRunByRequest,
  firstEventId,
  insertRun,
  lockRunStatus,
  notifyRunCancel,
  releaseRunLease,
  renewRunLease,
  resumeState,
  setRunTokenHash,
  startRun,
  transitionRun,
  tenantRunsExhausted,
  type NewRun,
  type RunRow,
} from '../store/run-store.js';
import { appendMessage, ensureSession, listMessages, type MessageRow } from '../store/session-store.js';

export interface RunsOptions {
  /** Opens agents' tokens (secrets of their tenant). */
  secrets: Secrets;
  orm: Orm;
  bus: EventBus;
  /** The process's shared commit for stream events. */
  appender: EventAppender;
  log: Logger;
  publicBaseUrl: string;
  agentIdleTimeoutMs: number;
  retry: RetryPolicy;
  /** How deep agent-to-agent calls may nest (a root run is depth 1). */
  maxDepth: number;
  /** How many of the session's latest messages an agent receives (seed 001 §6.1 sends the transcript). */
  transcriptLimit: number;
  /** This core's identity, recorded as the lease owner of the runs it executes. */
  coreId: string;
  /** How long a run's lease lasts; the executor renews it at a third of that. */
  leaseMs: number;
  /** The policies a tenant is under; they decide agent-to-agent calls too. */
  policy?: (tenantId: string) => PolicySet;
  /** Runs one tenant may have going at once; 0: no limit. Checked at start, so concurrent starts may pass it by a few. */
  maxRunsPerTenant: number;
  /** The session's execution consequences (seed 004), sent to the agent in `context`; a session its run just `opened` has none to read. */
  consequencesOf?: (tenantId: string, sessionId: string, opened: boolean) => Promise<Record<string, unknown>>;
  /** Agents served in-process (phase workflows): their runs are runs like any other. */
  builtins?: BuiltinAgents;
}

/** The endpoint of an agent served in-process. */
const BUILTIN_ENDPOINT = 'builtin:';

export interface StartCommand {
  sessionId: string;
  agentId: string;
  message: { role: string; content: string };
  requestId?: string;
  userId: string;
  /** The caller's tenant: the session must be new or already its. */
  tenantId: string;
  context?: Record<string, unknown>;
  parentRunId?: string;
  /** A W3C traceparent to continue instead of the active span's (a child run whose call came in another trace). */
  traceparent?: string;
  /** Runs inside the creating transaction, e.g. to record the call on a parent run. */
  onCreated?: (tx: EntityManager, runId: string) => Promise<void>;
  /**
   * Runs once the new run is stored, and before its agent is called: e.g. to
   * mark the caller's client online, so that the agent's first client tool
   * finds it. A failure is logged; the run goes on.
   */
  beforeLaunch?: () => Promise<void>;
}

export interface Started {
  run: RunRow;
  /** False when request_id matched an existing run of the session. */
  created: boolean;
  /** Cursor just before the run's first event; watch from here to see all of it. */
  cursorBefore: string;
  /**
   * The run's first events, when this core committed them in one statement:
   * the first events of the session after `cursorBefore`, so a watcher from
   * there may start with them instead of reading them.
   */
  events?: StoredEvent[];
}

export class Runs {
  readonly #opts: RunsOptions;
  readonly #log: Logger;
  readonly #inFlight = new InFlight();
  /** Runs this core is starting: leased, not yet launched (tracked in #inFlight). */
  readonly #starting = new Set<string>();

  constructor(opts: RunsOptions) {
    this.#opts = opts;
    this.#log = opts.log.child({ component: 'runs' });
  }

  #em(): EntityManager {
    return this.#opts.orm.em.fork();
  }

  /**
   * Creates the session if new, stores the user message, starts the run and
   * sets the agent call going. An unknown or unhealthy agent fails with
   * `agent_error` before anything is written.
   */
  async start(cmd: StartCommand): Promise<Started> {
    if (!cmd.agentId) throw invalidRequest('agent_id is required', 'agent_id');
    if (!cmd.sessionId) throw invalidRequest('session_id is required', 'session_id');
    if (cmd.message.role !== 'user') throw invalidRequest('message.role must be "user"', 'message.role');
    if (!cmd.message.content) throw invalidRequest('message.content is required', 'message.content');

    if (cmd.requestId) {
      const existing = await this.#existing(cmd.sessionId, cmd.requestId);
      if (existing && existing.run.tenantId !== cmd.tenantId) throw notFound('session', cmd.sessionId);
      if (existing) return existing;
    }
    // Both reads at once; an agent that cannot be invoked is the error to give first. A run
    // that starts in one statement is admitted by that statement (the tenant's limit of runs going).
    const [found, admitted] = await Promise.allSettled([
      this.#opts.builtins?.serves(cmd.agentId) ? this.#builtin(cmd.tenantId, cmd.agentId, true) : invocableAgent(this.#em(), cmd.tenantId, cmd.agentId),
      cmd.onCreated && this.#admit(cmd.tenantId),
    ]);
    if (found.status === 'rejected') throw found.reason;
    if (admitted.status === 'rejected') throw admitted.reason;
    const agent = found.value;
    const runId = newId('run');
    const token = newRunToken();
    // From its lease to its launch the run is this core's: the sweep must not take it for an orphan.
    this.#starting.add(runId);
    try {
      return await this.#startRun(cmd, agent, runId, token);
    } finally {
      this.#starting.delete(runId);
    }
  }

  async #startRun(cmd: StartCommand, agent: AgentRow, runId: string, token: string): Promise<Started> {
    // The run joins its caller's trace: the traceparent given, else the active span's.
    const parent = cmd.traceparent ? contextOf(cmd.traceparent, otel.active()) : otel.active();
    const traceId = traceIdOf(parent) ?? randomBytes(16).toString('hex');
    const newRun: NewRun = {
      runId,
      sessionId: cmd.sessionId,
      agentId: agent.agentId,
      parentRunId: cmd.parentRunId,
      requestId: cmd.requestId,
      traceId,
      traceparent: traceparentOf(parent),
      tokenHash: hashToken(token),
      userId: cmd.userId,
      tenantId: cmd.tenantId,
      lease: { owner: this.#opts.coreId, ms: this.#opts.leaseMs },
    };
    const events = [
      { type: 'user_input', payload: { message: cmd.message, request_id: cmd.requestId ?? null } },
      { type: 'run_started', payload: { agent_id: agent.agentId, request_id: cmd.requestId ?? null, trace_id: traceId, parent_run_id: cmd.parentRunId ?? null } },
    ];
    let started: { firstId: string; run: RunRow; events?: StoredEvent[]; transcript?: MessageRow[] } | undefined;
    try {
      // A run with nothing to record elsewhere starts in one statement; a refused one goes the transactional way, which says why.
      started = cmd.onCreated
        ? undefined
        : await this.#opts.bus.deliver(newRun, (origin) => startRun(this.#em(), newRun, cmd.message.content, events, origin, this.#opts.maxRunsPerTenant));
      started ??= await this.#em().transactional(async (tx) => {
        const owner = await ensureSession(tx, cmd.sessionId, cmd.userId, cmd.tenantId);
        if (owner.tenantId !== cmd.tenantId) throw notFound('session', cmd.sessionId);
        if (owner.userId !== cmd.userId) {
          throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: `session ${cmd.sessionId} belongs to another user` });
        }
        await insertRun(tx, newRun);
        await appendMessage(tx, { sessionId: cmd.sessionId, role: 'user', content: cmd.message.content, runId });
        // Before the start, so whatever the caller records (a parent's agent_call contract) sees the run start.
        await cmd.onCreated?.(tx, runId);
        const moved = await transitionRun(tx, this.#log, runId, 'start', events);
        return { firstId: moved.events[0]!.id, run: moved.run };
      });
    } catch (error) {
      // Two invokes with one request_id raced; the loser attaches to the winner's run.
      if (isUniqueViolation(error) && cmd.requestId) {
        const existing = await this.#existing(cmd.sessionId, cmd.requestId);
        if (existing) return existing;
      }
      throw error;
    }
    const { run, firstId } = started;
    await cmd.beforeLaunch?.().catch((error: unknown) => this.#log.warn({ err: error, runId }, 'before launch failed'));
    this.#launch(run, agent, token, { context: cmd.context ?? {}, parent, transcript: started.transcript });
    return { run, created: true, cursorBefore: String(BigInt(firstId) - 1n), ...(started.events && { events: started.events }) };
  }

  async #existing(sessionId: string, requestId: string): Promise<Started | null> {
    const run = await findRunByRequest(this.#em(), sessionId, requestId);
    if (!run) return null;
    return { run, created: false, cursorBefore: String(BigInt((await firstEventId(this.#em(), run.runId)) ?? '1') - 1n) };
  }

  async get(runId: string): Promise<RunRow> {
    const run = await findRun(this.#em(), runId);
    if (!run) throw notFound('run', runId);
    return run;
  }

  /** Refuses a run over the tenant's limit of runs going at once. */
  async #admit(tenantId: string): Promise<void> {
    const max = this.#opts.maxRunsPerTenant;
    if (max <= 0 || (await countLiveRuns(this.#em(), tenantId)) < max) return;
    throw tenantRunsExhausted(max);
  }

  find(runId: string): Promise<RunRow | null> {
    return findRun(this.#em(), runId);
  }

  /**
   * Starts a child run for an agent-to-agent call (seed 001 §7.3). The child
   * gets its own session (the user's transcript stays clean), continues the
   * parent's trace, and `agent_called_child` is written on the parent in the
   * same transaction. The depth limit and cycles (A -> B -> A) are refused.
   */
  async startChild(call: { agentId: string; parentRunId: string; message: { role: string; content: string }; context?: Record<string, unknown> }): Promise<Started> {
    const parent = await this.get(call.parentRunId);
    if (RUN_MACHINE.isTerminal(parent.status)) {
      throw new AbcError('FAILED_PRECONDITION', { code: 'parent_run_ended', message: `parent run ${parent.runId} is ${parent.status}` });
    }
    const chain = await ancestorRuns(this.#em(), parent.runId);
    const path = [...chain.map((r) => r.root_agent_id), call.agentId].join(' -> ');
    if (chain.some((r) => r.root_agent_id === call.agentId)) {
      throw new AbcError('FAILED_PRECONDITION', { code: 'a2a_cycle', message: `agent call cycle refused: ${path}`, details: { path } });
    }
    const verdict = decide(this.#opts.policy?.(parent.tenantId) ?? { platform: ALLOW_ALL }, {
      tool: call.agentId, args: {}, agentId: parent.rootAgentId, permissionLevel: 'PUBLIC', tenantId: parent.tenantId, action: 'agent_call',
    });
    if (verdict.decision !== 'allow') {
      const reason = verdict.decision === 'require_approval' ? `${verdict.reason} (an agent call cannot wait for an approval)` : verdict.reason;
      const details = { agent_id: call.agentId, ...verdictRecord(verdict) };
      await this.#em().transactional((tx) => appendEvents(tx, parent.runId, [{ type: 'policy_decision', payload: { action: 'agent_call', decision: 'block', code: 'blocked', reason, ...details } }]));
      throw new AbcError('PERMISSION_DENIED', { code: 'blocked', category: 'COMPLIANCE', message: `the policy does not allow calling agent ${call.agentId}: ${reason}`, details });
    }
    const maxDepth = this.#opts.maxDepth;
    if (chain.length >= maxDepth) {
      throw new AbcError('FAILED_PRECONDITION', { code: 'a2a_depth_exceeded', message: `agent calls may nest ${maxDepth} deep: ${path}`, details: { path, max_depth: maxDepth } });
    }
    return this.start({
      sessionId: newId('sess'),
      agentId: call.agentId,
      message: call.message,
      userId: parent.userId ?? 'system',
      tenantId: parent.tenantId,
      parentRunId: parent.runId,
      context: call.context,
      traceparent: traceparentOf(contextInTrace(parent.traceId)),
      onCreated: async (tx, childId) => {
        await appendEvents(tx, parent.runId, [{ type: 'agent_called_child', payload: { child_run_id: childId, agent_id: call.agentId, depth: chain.length + 1 } }]);
        const asked = call.message.content.length > 60 ? `${call.message.content.slice(0, 59)}…` : call.message.content;
        await openContract(tx, { sessionId: parent.sessionId, runId: parent.runId, subjectId: childId, actionType: 'agent_call', actionSummary: `${call.agentId} → ${asked}`, irreversible: false });
      },
    });
  }

  /**
   * Cancels a run and, with it, every child run still going: CANCELLED and
   * `run_cancelled` commit together, then every process is told, and the ones
   * calling the agents abort those requests.
   */
  async cancel(runId: string, reason: string, actor: string): Promise<RunRow> {
    await this.#em().transactional(async (tx) => {
      const cancelTree = async (id: string, why: string) => {
        await transitionRun(tx, this.#log, id, 'cancel', [{ type: 'run_cancelled', payload: { reason: why || null, actor } }], {
          code: 'cancelled',
          message: why || 'cancelled',
        });
        await notifyRunCancel(tx, id);
        for (const child of await activeChildren(tx, id)) await cancelTree(child, `parent run ${id} was cancelled`);
      };
      await cancelTree(runId, reason);
    });
    return this.get(runId);
  }

  /** The run's events after `cursor`, live, until the run has ended and its log is drained. */
  follow(runId: string, cursor: string, signal: AbortSignal): AsyncGenerator<StoredEvent> {
    const finished = async () => RUN_MACHINE.isTerminal((await this.get(runId)).status);
    const pool = poolOf(this.#opts.orm);
    return watchEvents(() => pool, this.#opts.bus, { filter: { runId }, cursor, signal, finished });
  }

  /** Waits for in-flight agent calls up to `graceMs`, then aborts them and fails their runs; a run that ignores its abort is left to recovery. */
  async close(graceMs: number): Promise<void> {
    const stuck = await this.#inFlight.drain(graceMs, new ShutdownAbort());
    if (stuck.length) this.#log.warn({ runs: stuck }, 'runs still going after their abort: left to recovery');
  }

  /**
   * Recovers runs whose executor died (their lease lapsed), claimed with SKIP
   * LOCKED so one core takes each:
   * - a run paused on a human or a client is detached: it keeps waiting, and
   *   when the wait ends the agent is invoked again in resume mode (below);
   * - a detached run that has resumed is invoked again with `context.resume`.
   *   The agent redoes its work; its tool calls hit the same idempotent calls,
   *   so nothing runs twice, and text it already streamed is not sent again;
   * - a run whose agent had sent nothing is invoked again;
   * - a run that had streamed output is taken over (`run_taken_over`) when its
   *   agent is `resumable`: invoked again with `context.resume` (the text its
   *   clients have, the last cursor, the tool calls made), and what it repeats
   *   of that text is dropped. Any other agent's run fails with
   *   `executor_lost`: replaying a live stream could diverge from what the
   *   client already saw.
   */
  async recoverOrphans(): Promise<number> {
    const claimed = await claimOrphanRuns(this.#em(), this.#opts.coreId, [...this.#inFlight.keys(), ...this.#starting], this.#opts.leaseMs);
    for (const { run_id: runId, status, detached: wasDetached, streamed, after_pause: afterPause, done_early: doneEarly } of claimed) {
      // A run that died while paused (or right after its pause ended) resumes; its agent was waiting, not streaming.
      const detached = wasDetached || afterPause;
      const run = (await findRun(this.#em(), runId))!;
      if (status !== 'RUNNING') {
        this.#log.warn({ runId, status }, 'the executor of a paused run was lost; the run waits detached');
        await releaseRunLease(this.#em(), runId, this.#opts.coreId);
        continue;
      }
      const agent = this.#opts.builtins?.serves(run.rootAgentId) ? await this.#builtin(run.tenantId, run.rootAgentId, false) : await getAgent(this.#em(), run.tenantId, run.rootAgentId);
      if (!agent) {
        await this.#fail(run, { code: 'agent_error', message: `agent ${run.rootAgentId} is no longer registered`, reason: 'unknown_agent', retryable: false });
        continue;
      }
      // Mid-stream, only an agent that continues from what its clients already have may take the run on.
      const takeover = streamed && !detached;
      if (takeover && !agent.resumable) {
        this.#log.warn({ runId }, 'the executor of a streaming run was lost');
        await this.#fail(run, { code: 'internal_error', message: 'the core executing this run stopped mid-stream', reason: 'executor_lost', retryable: true });
        continue;
      }
      // The lost executor's token died with it; the new call gets a fresh one.
      const token = newRunToken();
      await setRunTokenHash(this.#em(), runId, hashToken(token));
      const resume = detached || takeover;
      const state = resume ? await resumeState(this.#em(), runId) : undefined;
      // An agent that said done while its run waited is resumed for the outcome it has not seen.
      const reason = doneEarly ? 'agent_done_while_paused' : 'executor_lost';
      this.#log.warn({ runId, resume, reason }, takeover ? 'taking over a run whose core was lost mid-stream' : 'invoking the agent of a recovered run again');
      await this.#em().transactional((tx) =>
        appendEvents(tx, runId, [
          ...(takeover ? [{ type: 'run_taken_over', payload: { reason, core_id: this.#opts.coreId, streamed_chars: state!.streamed_text.length, last_cursor: state!.last_cursor } }] : []),
          { type: 'agent_invoke_retry', payload: { reason, resume, attempt: 0, delay_ms: 0 } },
        ]),
      );
      const context = state ? { resume: { reason, streamed_chars: state.streamed_text.length, ...state } } : {};
      this.#launch(run, agent, token, { context, alreadySent: state?.streamed_text ?? '' });
    }
    return claimed.length;
  }

  /** An in-process agent as the run machinery sees an agent; `check` refuses an unknown one as an unregistered agent is. */
  async #builtin(tenantId: string, agentId: string, check: boolean): Promise<AgentRow> {
    if (check) await this.#opts.builtins!.check(tenantId, agentId);
    return {
      tenantId, agentId, name: agentId, endpoint: BUILTIN_ENDPOINT, capabilities: [], resumable: false, status: 'healthy', statusReason: null, lastHeartbeat: null, createdAt: new Date(0), authToken: null, ownerKeyId: null,
    };
  }

  #launch(run: RunRow, agent: AgentRow, token: string, how: Launch): void {
    const alreadySent = how.alreadySent ?? '';
    const parent = how.parent ?? contextInTrace(run.traceId, run.traceparent);
    // The run's span: its agent call, from the first attempt to the run's end on this core.
    const { span, context: spanContext } = startSpan(`invoke_agent ${agent.agentId}`, {
      kind: SpanKind.CLIENT,
      attributes: {
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.agent.id': agent.agentId,
        'gen_ai.agent.name': agent.name,
        'gen_ai.conversation.id': run.sessionId,
        'abc.run.id': run.runId,
        ...(alreadySent && { 'abc.run.resumed': true }),
      },
    }, parent);
    const controller = new AbortController();
    const offCancel = this.#opts.bus.onCancel(run.runId, () => controller.abort(new CancelAbort()));
    const renew = setInterval(() => {
      untraced(() => renewRunLease(this.#em(), run.runId, this.#opts.coreId, this.#opts.leaseMs))
        .then((held) => {
          // Ended, or another core took the run over: this executor must stop.
          if (!held) controller.abort(new CancelAbort());
        })
        .catch((error) => this.#log.warn({ err: error, runId: run.runId }, 'lease renewal failed'));
    }, Math.max(50, Math.floor(this.#opts.leaseMs / 3)));
    const work = otel.with(spanContext, () => this.#execute(run, agent, token, how, controller.signal))
      .catch((error) => {
        failSpan(span, error);
        this.#log.error({ err: error, runId: run.runId, trace_id: run.traceId }, 'run execution failed');
      })
      .finally(() => {
        clearInterval(renew);
        offCancel();
        span.end();
      });
    void this.#inFlight.track(work, controller, run.runId);
  }

  async #execute(run: RunRow, agent: AgentRow, token: string, { context, alreadySent = '', transcript: known }: Launch, signal: AbortSignal): Promise<void> {
    const log = this.#log.child({ runId: run.runId, agentId: agent.agentId });
    const writer = new EventWriter(this.#opts.appender, run.runId);
    const started = Date.now();
    const texts: string[] = [alreadySent];
    // On resume, the agent either streams again from the start (what clients already have is dropped) or continues after it.
    let skip = alreadySent;
    try {
      const limit = this.#opts.transcriptLimit;
      // A run that opened its session has its whole transcript in hand, and the session no consequences yet.
      const [transcript, consequences] = await Promise.all([
        known ? { messages: known.slice(-limit), hasMore: known.length > limit } : listMessages(this.#em(), run.sessionId, limit),
        this.#opts.consequencesOf?.(run.tenantId, run.sessionId, known !== undefined),
      ]);
      // A cut transcript is said so: the agent can page the rest from GET /v1/sessions/{id}/messages.
      const cut = transcript.hasMore ? { transcript_truncated: { sent_messages: transcript.messages.length, limit, oldest_message_id: transcript.messages[0]?.messageId } } : {};
      if (transcript.hasMore) log.info({ limit }, 'the transcript sent to the agent was cut to its latest messages');
      const input = transcript.messages.findLast((m) => m.runId === run.runId && m.role === 'user');
      writer.push({ type: 'agent_invoke_started', payload: { agent_id: agent.agentId, endpoint: agent.endpoint } });
      const builtin = agent.endpoint === BUILTIN_ENDPOINT && this.#opts.builtins;
      const events = builtin
        ? builtin.invoke({ tenantId: run.tenantId, sessionId: run.sessionId, runId: run.runId, agentId: agent.agentId, userId: run.userId, input: input?.content ?? '', signal, alreadySent })
        : invokeAgent({
        endpoint: agent.endpoint,
        authToken: agent.authToken && (await this.#opts.secrets.agentToken(run.tenantId, agent.authToken)),
        signal,
        idleTimeoutMs: this.#opts.agentIdleTimeoutMs,
        retry: this.#opts.retry,
        onRetry: (fault, attempt, delayMs) => {
          log.warn({ reason: fault.reason, attempt, delayMs }, 'agent call failed before the first byte; retrying');
          writer.push({ type: 'agent_invoke_retry', payload: { reason: fault.reason, message: fault.message, attempt: attempt + 1, delay_ms: delayMs } });
        },
        headers: {
          traceparent: traceparentOf()!,
          'x-session-id': run.sessionId,
          'x-run-id': run.runId,
          'x-platform-base-url': this.#opts.publicBaseUrl,
          'x-abc-run-token': token,
        },
        body: {
          agent_id: agent.agentId,
          session_id: run.sessionId,
          run_id: run.runId,
          input_message: { role: 'user', content: input?.content ?? '' },
          messages: transcript.messages.map((m) => ({ role: m.role, content: m.content })),
          context: { user_id: run.userId, ...(consequences && { execution_consequences: consequences }), ...cut, ...context },
        },
      });
      for await (const event of events) {
        if (event.type === 'delta') {
          let text = event.text;
          if (skip) {
            if (skip.startsWith(text)) {
              skip = skip.slice(text.length);
              continue;
            }
            // Past the delivered text, or not a repeat of it: the agent continues from there.
            if (text.startsWith(skip)) text = text.slice(skip.length);
            skip = '';
          }
          texts.push(text);
          writer.push({ type: 'agent_stream_delta', payload: { text } });
        } else if (event.type === 'state') {
          writer.push({ type: 'agent_state', payload: { state: event.state, detail: event.detail } });
        } else if (event.type === 'done') {
          await writer.flush();
          const finalMessage = event.finalMessage ?? texts.join('');
          await this.#complete(run, event.usage, finalMessage, Date.now() - started, event.detail, event.metadata);
          return;
        } else {
          await writer.flush();
          await this.#fail(run, { code: 'agent_error', message: event.message, reason: 'agent_reported', agent_code: event.code, retryable: true });
          return;
        }
      }
    } catch (error) {
      await writer.flush().catch(() => {});
      if (signal.reason instanceof CancelAbort) return;
      if (signal.reason instanceof ShutdownAbort) {
        await this.#fail(run, { code: 'internal_error', message: 'ABC shut down while the run was in progress', reason: 'shutdown', retryable: true });
        return;
      }
      if (error instanceof AgentFault) {
        log.warn({ reason: error.reason, message: error.message }, 'agent fault');
        await this.#fail(run, { code: 'agent_error', message: error.message, reason: error.reason, retryable: true });
        return;
      }
      log.error({ err: error }, 'run failed unexpectedly');
      await this.#fail(run, { code: 'internal_error', message: 'internal error', reason: 'internal', retryable: true });
    }
  }

  async #complete(run: RunRow, usage: Record<string, unknown>, finalMessage: string, durationMs: number, detail?: Record<string, unknown>, metadata?: Record<string, unknown>): Promise<void> {
    const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
    const prompt = num(usage.prompt_tokens);
    const completion = num(usage.completion_tokens);
    const normalized = {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: num(usage.total_tokens) || num(usage.tokens) || prompt + completion,
      duration_ms: durationMs,
    };
    const events = [
      { type: 'agent_invoke_done', payload: { agent_id: run.rootAgentId, usage } },
      { type: 'run_done', payload: { usage: normalized, final_message: finalMessage, ...(detail && { detail }) } },
    ];
    // A retry after a lost commit finds the run ended and is refused as a whole.
    await retryWhileUnavailable(async () => {
      // A running run completes in one statement; a paused or ended one goes the transactional way.
      if (await this.#opts.bus.deliver(run, (origin) => completeRun(this.#em(), run, { content: finalMessage, metadata }, events, origin), true)) return;
      await this.#em().transactional(async (tx) => {
        const status = await lockRunStatus(tx, run.runId);
        if (status === 'PAUSED_WAITING_APPROVAL' || status === 'PAUSED_WAITING_TOOL') return this.#detach(tx, run, status, usage, finalMessage);
        await appendMessage(tx, { sessionId: run.sessionId, role: 'assistant', content: finalMessage, runId: run.runId, metadata });
        await transitionRun(tx, this.#log, run.runId, 'complete', events);
      });
    }).catch((error) => ignoreIfEnded(error));
  }


  /**
   * An agent that says `done` while its run waits on an approval or a client
   * tool has not seen that outcome yet. The run is not ended under the human:
   * the early `done` is recorded (`agent_done_while_paused`), the run is
   * detached, and once the wait ends the agent is invoked again in resume mode
   * with the outcome, as for a run whose core stopped while it waited.
   */
  async #detach(tx: EntityManager, run: RunRow, status: RunState, usage: Record<string, unknown>, finalMessage: string): Promise<void> {
    await appendEvents(tx, run.runId, [{ type: 'agent_done_while_paused', payload: { status, final_message: finalMessage, usage, outcome: 'resumes_after_wait' } }]);
    await releaseRunLease(tx, run.runId);
    this.#log.warn({ runId: run.runId, status }, 'the agent finished while its run waits; the run resumes the agent after the wait');
  }

  async #fail(run: RunRow, error: { code: string; message: string; reason: string; retryable: boolean; agent_code?: string }): Promise<void> {
    const span = trace.getActiveSpan();
    if (span) failSpan(span, new AbcError('UNAVAILABLE', { code: error.code, message: error.message }), { 'abc.run.failure_reason': error.reason });
    await retryWhileUnavailable(() =>
      this.#em().transactional((tx) => transitionRun(tx, this.#log, run.runId, 'fail', [{ type: 'run_failed', payload: { error } }], error)),
    ).catch((e) => ignoreIfEnded(e));
  }

}

/** A run cancelled while its agent finished: the transition is refused (and logged); nothing more to do. */
function ignoreIfEnded(error: unknown): void {
  if (error instanceof AbcError && error.payload.code === 'illegal_transition') return;
  throw error;
}

/** How a run's agent call is launched. */
interface Launch {
  context: Record<string, unknown>;
  /** The text its clients already have (a run taken over): what the agent repeats of it is dropped. */
  alreadySent?: string;
  /** The trace it continues; else the run's own. */
  parent?: Context;
  /** The session's whole transcript, when the run's start opened the session. */
  transcript?: MessageRow[];
}

class CancelAbort extends Error {}
class ShutdownAbort extends Error {}

/** States in which a run has an executor holding a lease. */

