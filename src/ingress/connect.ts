// IngressService.Connect: one IM connection (seed 001 §5). Client frames become
// orchestrator commands; each session the connection touches is watched from
// the event log, so a reconnect with `resume` replays what was missed, then goes live.
import { ApprovalVerdict, type AgentInvoke, type ApprovalDecision, type Hello, type ToolResult } from '../../gen/abc/ingress/v1/im.js';
import type { ConnectRequest, ConnectResponse } from '../../gen/abc/ingress/v1/ingress.js';
import type { ApiKeys } from '../access/api-keys.js';
import { defaultUser, requireRun, speaksFor, type KeyPrincipal } from '../access/principal.js';
import { hasScope } from '../access/scopes.js';
import { AbcError } from '../domain/errors.js';
import type { CallContext } from '../grpc/bind.js';
import { checkRequest, MAX_ID_LENGTH, Undecodable } from '../grpc/boundary.js';
import { AsyncQueue } from '../grpc/async-queue.js';
import { byTick } from '../runtime/by-tick.js';
import { newId } from '../runtime/new-id.js';
import { context as otel, contextOf, type Context } from '../runtime/tracing.js';
import type { Logger } from '../runtime/log.js';
import type { Runs } from '../orchestrator/runs.js';
import type { ToolCalls } from '../orchestrator/tool-calls.js';
import type { Presence } from '../store/presence.js';
import { getSession } from '../store/session-store.js';
import type { EventBus } from '../store/event-bus.js';
import type { Orm } from '../store/orm.js';
import type { StoredEvent } from '../store/event-log.js';
import { watchEvents } from '../store/event-watch.js';
import { poolOf } from '../store/native.js';
import { frameOf } from './frames.js';

export interface ConnectDeps {
  orm: Orm;
  bus: EventBus;
  runs: Runs;
  toolCalls: ToolCalls;
  presence: Presence;
  keys: ApiKeys;
  log: Logger;
  /** A connection that has not said a valid hello by then is closed. */
  helloTimeoutMs: number;
}

type Frame = NonNullable<ConnectResponse['frame']>;

/** Why a connection's watches stop: one reason for all, not an error built per watch. */
const CLOSED = 'connection closed';
const REPLACED = 'replaced by a newer watch';
/**
 * The session frames a connection holds for its client: past this many, its
 * watchers wait (and read the log later) until the client has taken them. A
 * client that reads slowly holds back its own stream, not the core's memory.
 */
const MAX_QUEUED_FRAMES = 256;
/**
 * The most frames one message carries (at most 16 KB each when they are
 * deltas): a reader that stops buffers a few messages, and each stays small.
 */
const MAX_BATCH_FRAMES = 32;

export async function* connect(deps: ConnectDeps, requests: AsyncIterable<ConnectRequest>, ctx: CallContext): AsyncGenerator<ConnectResponse> {
  const connection = new Connection(deps, ctx);
  void connection.read(requests);
  // Frames ready in one burst (one committed batch) go out in one message, to a
  // connection that asked: at most MAX_BATCH_FRAMES a message.
  for await (const frames of byTick(connection.out, MAX_BATCH_FRAMES)) {
    if (connection.batching && frames.length > 1) yield { ts: Date.now(), requestId: '', sessionId: '', runId: '', cursor: '', frame: { $case: 'batch', value: { frames } } };
    else yield* frames;
  }
}

class Connection {
  readonly out = new AsyncQueue<ConnectResponse>();
  readonly #deps: ConnectDeps;
  readonly #signal: AbortSignal;
  readonly #log: Logger;
  readonly #watchers = new Map<string, AbortController>();
  /** The sessions whose client this connection has announced itself as, with that write. */
  readonly #present = new Map<string, Promise<void>>();
  readonly #id = newId('conn');
  #user: { userId: string; principal: KeyPrincipal } | undefined;
  /** Closes a connection that has said no valid hello in time. */
  readonly #helloTimer: NodeJS.Timeout;
  /** Event types this connection asked not to receive (hello.exclude_events). */
  #exclude: string[] = [];
  /** Whether its hello asked for frames in batches (hello.batch_frames). */
  batching = false;
  /** The trace its runs join: hello's `traceparent`, else the call's (the WebSocket upgrade's). */
  #trace: Context = otel.active();

  constructor(deps: ConnectDeps, ctx: CallContext) {
    this.#deps = deps;
    this.#signal = ctx.signal;
    this.#log = deps.log.child({ component: 'ingress', connection: this.#id });
    ctx.signal.addEventListener('abort', () => this.#close(), { once: true });
    this.#helloTimer = setTimeout(() => {
      this.#error({ requestId: '', sessionId: '', runId: '' }, 'hello_timeout', `no valid hello within ${deps.helloTimeoutMs} ms`, 'type');
      this.#close();
    }, deps.helloTimeoutMs);
    this.#helloTimer.unref();
  }

  async read(requests: AsyncIterable<ConnectRequest>): Promise<void> {
    try {
      // No `break`: leaving the loop early would destroy the call before queued frames flush.
      for await (const request of requests) {
        if (!this.out.ended) await this.#handle(request);
      }
    } catch (error) {
      if (!this.#signal.aborted) this.#log.warn({ err: error }, 'connection read failed');
    } finally {
      this.#close();
    }
  }

  #close(): void {
    clearTimeout(this.#helloTimer);
    for (const watcher of this.#watchers.values()) watcher.abort(CLOSED);
    this.#watchers.clear();
    this.out.end();
    void this.#deps.presence.leave(this.#id).catch((error) => this.#log.warn({ err: error }, 'presence cleanup failed'));
  }

  #send(request: Pick<ConnectRequest, 'requestId' | 'sessionId' | 'runId'>, frame: Frame): void {
    this.out.push({ ts: Date.now(), requestId: request.requestId, sessionId: request.sessionId, runId: request.runId, cursor: '', frame });
  }

  #error(request: Pick<ConnectRequest, 'requestId' | 'sessionId' | 'runId'>, code: string, message: string, field = '', retryable = false): void {
    this.#send(request, { $case: 'error', value: { code, message, field, retryable } });
  }

  async #handle(request: ConnectRequest | Undecodable): Promise<void> {
    if (request instanceof Undecodable) return this.#error({ requestId: '', sessionId: '', runId: '' }, 'invalid_request', `the frame is not a valid protobuf message: ${request.reason.slice(0, 200)}`);
    try {
      checkRequest(request);
    } catch (error) {
      const abc = AbcError.from(error);
      return this.#error(safeIds(request), abc.payload.code, abc.payload.message, String(abc.payload.details?.field ?? ''));
    }
    const frame = request.frame;
    if (!frame) return this.#error(request, 'invalid_request', 'the frame has no type', 'type');
    if (frame.$case === 'hello') return this.#hello(request, frame.value);
    if (!this.#user) {
      this.#error(request, 'unauthenticated', 'the first frame must be hello with a valid api_key', 'type');
      return this.#close();
    }
    try {
      switch (frame.$case) {
        case 'agentInvoke':
          return await this.#invoke(request, frame.value);
        case 'cancelRun':
          return await this.#cancel(request);
        case 'resume':
          return await this.#resume(request, frame.value.cursor);
        case 'approvalDecision':
          return await this.#decide(request, frame.value);
        case 'toolResult':
          return await this.#toolResult(request, frame.value);
      }
    } catch (error) {
      const abc = AbcError.from(error);
      if (abc.status === 'INTERNAL') this.#log.error({ err: error }, 'frame failed');
      const field = typeof abc.payload.details?.field === 'string' ? abc.payload.details.field : '';
      this.#error(request, abc.payload.code, abc.payload.message, field, abc.payload.retryable);
    }
  }

  async #hello(request: ConnectRequest, { apiKey, userId, excludeEvents, traceparent, batchFrames }: Hello): Promise<void> {
    // A connection speaks for one user: a second hello never switches it.
    if (this.#user) return this.#error(request, 'already_authenticated', `this connection already speaks for user ${this.#user.userId}`, 'type');
    const principal = apiKey ? await this.#deps.keys.verify(apiKey) : null;
    if (!principal) {
      this.#error(request, 'unauthenticated', 'invalid api_key', 'api_key');
      return this.#close();
    }
    const user = userId || defaultUser(principal);
    if (!hasScope(principal.scopes, 'client') || !speaksFor(principal, user)) {
      this.#error(request, 'forbidden', hasScope(principal.scopes, 'client') ? `this API key does not speak for user ${user}` : 'this API key lacks the client scope', 'user_id');
      return this.#close();
    }
    clearTimeout(this.#helloTimer);
    this.#user = { userId: user, principal };
    this.#exclude = excludeEvents.filter(Boolean);
    this.batching = batchFrames;
    if (traceparent) this.#trace = contextOf(traceparent, this.#trace);
    this.#send(request, { $case: 'helloAck', value: { userId: this.#user.userId, connectionId: this.#id } });
  }

  async #invoke(request: ConnectRequest, invoke: AgentInvoke): Promise<void> {
    const sessionId = request.sessionId || newId('sess');
    const started = await otel.with(this.#trace, () => this.#deps.runs.start({
      sessionId,
      agentId: invoke.agentId,
      message: invoke.message ?? { role: 'user', content: '' },
      requestId: request.requestId || undefined,
      userId: this.#user!.userId,
      tenantId: this.#user!.principal.tenantId,
      context: invoke.context,
      // The agent may call a client tool at once: it must find this client online.
      beforeLaunch: () => this.#join(sessionId),
    }));
    if (this.#watchers.has(sessionId)) {
      // Already watching: a new run's run_started arrives from the log; a duplicate gets its answer now.
      if (!started.created) {
        this.#send({ ...request, sessionId, runId: started.run.runId }, { $case: 'runStarted', value: { agentId: started.run.rootAgentId, traceId: started.run.traceId } });
      }
      return;
    }
    this.#watch(sessionId, started.cursorBefore, started.events);
  }

  /** An approval decided by this connection's user; the outcome arrives as frames from the log. */
  async #decide(request: ConnectRequest, decision: ApprovalDecision): Promise<void> {
    if (!decision.approvalId) return this.#error(request, 'invalid_request', 'approval_id is required', 'approval_id');
    const verdict = decision.decision === ApprovalVerdict.APPROVAL_VERDICT_APPROVE ? 'approve' : decision.decision === ApprovalVerdict.APPROVAL_VERDICT_REJECT ? 'reject' : null;
    if (!verdict) return this.#error(request, 'invalid_request', 'decision must be approve or reject', 'decision');
    await this.#deps.toolCalls.decide(decision.approvalId, verdict, this.#user!.principal, this.#user!.userId, decision.reason);
  }

  /** A client tool's result; the call's state change arrives as frames from the log. */
  async #toolResult(request: ConnectRequest, result: ToolResult): Promise<void> {
    if (!result.toolCallId) return this.#error(request, 'invalid_request', 'tool_call_id is required', 'tool_call_id');
    await this.#deps.toolCalls.submitResult(this.#user!.principal, this.#user!.userId, {
      toolCallId: result.toolCallId,
      ok: result.ok,
      result: result.result,
      errorMessage: result.errorMessage,
    });
  }

  async #cancel(request: ConnectRequest): Promise<void> {
    if (!request.runId) return this.#error(request, 'invalid_request', 'run_id is required', 'run_id');
    const run = requireRun(this.#user!.principal, await this.#deps.runs.find(request.runId), request.runId);
    await this.#requireOwner(run.sessionId);
    await this.#deps.runs.cancel(run.runId, 'cancelled by the user', `user:${this.#user!.userId}`);
  }

  async #resume(request: ConnectRequest, cursor: string): Promise<void> {
    if (!request.sessionId) return this.#error(request, 'invalid_request', 'session_id is required to resume', 'session_id');
    if (cursor && !/^\d{1,19}$/.test(cursor)) return this.#error(request, 'invalid_request', 'cursor must be a cursor from a previous frame', 'cursor');
    await this.#requireOwner(request.sessionId);
    this.#watch(request.sessionId, cursor || '0');
  }

  async #requireOwner(sessionId: string): Promise<void> {
    const session = await getSession(this.#deps.orm.em.fork(), sessionId);
    // Another tenant's session does not exist for this connection.
    if (!session || session.tenantId !== this.#user!.principal.tenantId) throw new AbcError('NOT_FOUND', { code: 'invalid_request', message: `session ${sessionId} not found`, details: { field: 'session_id' } });
    if (session.userId !== this.#user!.userId) throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: `session ${sessionId} belongs to another user` });
  }

  /**
   * Marks this connection as a client of the session, once, so that it can
   * run the session's client tools. A write that fails is logged. A closed
   * connection joins nothing: its row would outlive it.
   */
  #join(sessionId: string): Promise<void> {
    if (this.out.ended) return Promise.resolve();
    let joined = this.#present.get(sessionId);
    if (!joined) {
      joined = this.#deps.presence.join(this.#id, sessionId, this.#user!.userId).catch((error) => this.#log.warn({ err: error }, 'presence update failed'));
      this.#present.set(sessionId, joined);
    }
    return joined;
  }

  /** Streams the session's frames after `cursor` (the first of them `known`, when given), replacing any earlier watcher of it. */
  #watch(sessionId: string, cursor: string, known?: StoredEvent[]): void {
    this.#watchers.get(sessionId)?.abort(REPLACED);
    const controller = new AbortController();
    this.#watchers.set(sessionId, controller);
    void this.#join(sessionId);
    const pool = poolOf(this.#deps.orm);
    void (async () => {
      try {
        for await (const event of watchEvents(() => pool, this.#deps.bus, { filter: { sessionId, excludeTypes: this.#exclude }, cursor, known, signal: controller.signal })) {
          const frame = frameOf(event);
          if (!frame) continue;
          if (this.out.size >= MAX_QUEUED_FRAMES) {
            await this.out.room(MAX_QUEUED_FRAMES);
            // A watch replaced while it waited sends nothing more: its successor sends from its own cursor.
            if (controller.signal.aborted) return;
          }
          this.out.push(frame);
        }
      } catch (error) {
        if (!controller.signal.aborted) {
          this.#log.error({ err: error, sessionId }, 'session watch failed');
          this.#error({ requestId: '', sessionId, runId: '' }, 'internal_error', 'event delivery failed; resume from your last cursor', '', true);
        }
      }
    })();
  }
}

/** The ids of a refused frame, echoed only when they are fit to echo. */
function safeIds(request: ConnectRequest): Pick<ConnectRequest, 'requestId' | 'sessionId' | 'runId'> {
  const fit = (id: string) => (id.length <= MAX_ID_LENGTH && !id.includes('\u0000') && id.isWellFormed() ? id : '');
  return { requestId: fit(request.requestId), sessionId: fit(request.sessionId), runId: fit(request.runId) };
}
