// The LLM proxy plane (seed 001 §4.2, §7.1): OpenAI-compatible (chat
// completions, the Responses API, embeddings), byte-exact, recorded as
// llm_call_started / llm_call_done on the calling run.
import { metrics } from '../runtime/metrics.js';
import { Metadata } from '@grpc/grpc-js';
import type { LlmProxyServiceService, ServerSentEvent, StreamResponseResponse } from '../../gen/abc/orchestrator/v1/llm.js';
import { CHAT, EMBEDDINGS, endpointOf, RESPONSES, type LlmEndpoint, type Usage } from './llm-endpoints.js';
import { seesRun, type Principal } from '../access/principal.js';
import { budgetsOf, decide, verdictRecord, type PolicySet, type TokenBudgets } from '../domain/policy.js';
import { appendEvents } from '../store/event-log.js';
import { addTenantTokens, tokensSpent } from '../store/token-usage.js';
import { AbcError, invalidRequest, unauthenticated } from '../domain/errors.js';
import { LlmUpstream, UpstreamError, type Attempt } from '../execution/llm-upstream.js';
import type { CallContext, ServiceHandlers } from '../grpc/bind.js';
import { newId } from '../runtime/new-id.js';
import type { Logger } from '../runtime/log.js';
import { failSpan, SpanKind, startSpan, traceparentOf, type Span } from '../runtime/tracing.js';
import type { Orm } from '../store/orm.js';
import { EventWriter } from './event-writer.js';
import type { EventAppender } from '../store/event-appender.js';
import { addRunTokens, findRun } from '../store/run-store.js';

export interface LlmProxyOptions {
  orm: Orm;
  /** The process's shared commit for run events. */
  appender: EventAppender;
  log: Logger;
  upstream: LlmUpstream | undefined;
  /** The policies a tenant is under: which models it or an agent may call, and token budgets. */
  policy: (tenantId: string) => PolicySet;
}

/** A whole answer as the RPCs return it. */
interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  requestId: string;
}

interface Call {
  requestId: string;
  /** Which OpenAI API: chat.completions, responses or embeddings. */
  api: string;
  runId: string | null;
  tenantId: string;
  /** Whether its tokens are counted (a run's call, or any call under a budget). */
  accounted: boolean;
  model: string;
  stream: boolean;
  started: number;
  attempts: number;
  ttftMs: number | null;
  usage: Usage | null;
  servedBy: string | null;
  /** The call's span (GenAI semantic conventions); the router gets its traceparent. */
  span: Span;
  traceparent: string | undefined;
}

export class LlmProxy {
  readonly #opts: LlmProxyOptions;
  readonly #log: Logger;
  readonly #pending = new Set<Promise<void>>();
  /** One group-commit writer per run, shared by its concurrent calls. */
  readonly #writers = new Map<string, { writer: EventWriter; users: number }>();

  constructor(opts: LlmProxyOptions) {
    this.#opts = opts;
    this.#log = opts.log.child({ component: 'llm-proxy' });
  }

  handlers(): ServiceHandlers<typeof LlmProxyServiceService> {
    return {
      createChatCompletion: (req, ctx) => this.#complete(CHAT, req, ctx),
      streamChatCompletion: (req, ctx) => this.#stream(CHAT, req, ctx),
      createResponse: (req, ctx) => this.#complete(RESPONSES, req, ctx),
      streamResponse: (req, ctx) => this.#stream(RESPONSES, req, ctx),
      createEmbedding: (req, ctx) => this.#complete(EMBEDDINGS, req, ctx),
      listModels: async (_req, ctx) => {
        try {
          return await this.#upstream().models(ctx.signal);
        } catch (error) {
          throw toAbcError(error, ctx.signal);
        }
      },
    };
  }

  /** A whole answer, relayed with its status and headers. */
  async #complete(endpoint: LlmEndpoint, req: { body: Uint8Array; runId: string }, ctx: CallContext): Promise<Answer> {
    const json = parseBody(req.body, endpoint);
    if (json.stream === true) throw invalidRequest('stream: true needs the streaming call', 'stream');
    const call = await this.#begin(ctx.principal, req.runId, json, false, endpoint);
    const writer = this.#record(call, { type: 'llm_call_started', payload: startedPayload(call) });
    try {
      const res = await this.#upstream().complete(endpoint.path, Buffer.from(req.body), json, { signal: ctx.signal, onRetry: (a) => this.#retried(call, a), traceparent: call.traceparent });
      call.servedBy = res.model;
      // Usage is read only where it is kept: a run's record, or the debug log.
      if (writer || call.accounted || this.#log.isLevelEnabled('debug')) call.usage = endpoint.usage(parseJson(res.body));
      this.#finish(call, writer, null);
      return { status: res.status, headers: res.headers, body: res.body, requestId: call.requestId };
    } catch (error) {
      this.#finish(call, writer, error);
      // The upstream's own error answer is relayed byte for byte.
      if (error instanceof UpstreamError && error.kind === 'http' && error.body) {
        return { status: error.status, headers: error.headers, body: error.body, requestId: call.requestId };
      }
      throw toAbcError(error, ctx.signal);
    }
  }

  /**
   * A streaming call: events as they arrive, then the done marker. A batched
   * caller gets the events that arrived together in one message.
   */
  async *#stream(endpoint: LlmEndpoint, req: { body: Uint8Array; runId: string; batched?: boolean }, ctx: CallContext): AsyncGenerator<StreamResponseResponse> {
    let json = parseBody(req.body, endpoint);
    let body = Buffer.from(req.body);
    const call = await this.#begin(ctx.principal, req.runId, json, true, endpoint);
    // Usage is always asked for, so streamed calls are accounted; the extra event is
    // dropped when the client did not ask for it.
    const asked = endpoint.askUsage?.(json);
    if (asked) {
      json = asked;
      body = Buffer.from(JSON.stringify(json));
    }
    const writer = this.#record(call, { type: 'llm_call_started', payload: startedPayload(call) });
    const messages = (events: ServerSentEvent[]): StreamResponseResponse[] =>
      req.batched ? [{ data: EMPTY, done: false, requestId: call.requestId, event: '', events }] : events.map((e) => ({ ...e, done: false, requestId: call.requestId, events: [] }));
    let sent = 0;
    let outcome: unknown = null;
    try {
      // What one socket read brought leaves as one batch.
      for await (const batch of this.#upstream().stream(endpoint.path, body, json, { signal: ctx.signal, onRetry: (a) => this.#retried(call, a), traceparent: call.traceparent })) {
        call.servedBy = batch.model;
        const events: ServerSentEvent[] = [];
        for (const chunk of batch.events) {
          const usage = endpoint.streamUsage?.(chunk.data);
          if (usage) {
            call.usage = usage.usage;
            if (asked && usage.only) continue;
          }
          events.push({ event: chunk.event ?? '', data: Buffer.from(chunk.data) });
        }
        if (!events.length) continue;
        if (call.ttftMs === null) {
          call.ttftMs = Date.now() - call.started;
          call.span.addEvent('gen_ai.first_chunk');
        }
        sent += events.length;
        yield* messages(events);
      }
      yield { data: EMPTY, done: true, requestId: call.requestId, event: '', events: [] };
    } catch (error) {
      outcome = error;
      if (ctx.signal.aborted) return;
      if (sent === 0) throw toAbcError(error, ctx.signal);
      // Mid-stream: end with a well-formed OpenAI error event; the client's SDK raises it.
      const message = error instanceof Error ? error.message : 'upstream failed';
      const data = JSON.stringify({ ...(endpoint === RESPONSES && { type: 'error', code: 'stream_interrupted', message }), error: { message, type: 'upstream_error', code: 'stream_interrupted' } });
      yield* messages([{ data: Buffer.from(data), event: endpoint === RESPONSES ? 'error' : '' }]);
    } finally {
      this.#finish(call, writer, ctx.signal.aborted && !outcome ? new Error('aborted by the client') : outcome);
    }
  }

  /**
   * A streaming chat completion ABC makes for one of its runs (a workflow's
   * turn): the run's tenant's policy and budgets, the proxy's retries and
   * fallbacks, and the call recorded on the run, exactly as an agent's call
   * with its run token. Yields each chunk's JSON; a failure after the first
   * chunk ends with an `{"error": …}` chunk, one before it throws.
   */
  async *streamForRun(run: { runId: string; sessionId: string; agentId: string; tenantId: string }, body: Record<string, unknown>, signal: AbortSignal): AsyncGenerator<string> {
    const principal: Principal = { kind: 'run', ...run };
    const ctx = { principal, signal, metadata: new Metadata(), log: this.#log, accept: () => {} };
    for await (const m of this.#stream(CHAT, { body: Buffer.from(JSON.stringify({ ...body, stream: true })), runId: run.runId }, ctx)) {
      if (!m.done) yield Buffer.from(m.data).toString('utf8');
    }
  }

  /** Waits for every call record to be written. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.#pending]);
    this.#opts.upstream?.close();
  }

  #upstream(): LlmUpstream {
    if (!this.#opts.upstream) throw new AbcError('FAILED_PRECONDITION', { code: 'llm_error', category: 'EXECUTION', message: 'no LLM router is configured (LLM_ROUTER_URL)', retryable: false });
    return this.#opts.upstream;
  }

  /**
   * Authorises the call and links it to a run (a run token to its own run, an
   * API key to any of its tenant's), then asks the policy: the model must be
   * allowed for the tenant and agent, and no token budget used up.
   */
  async #begin(principal: Principal | null, runIdHeader: string, json: Record<string, unknown>, stream: boolean, endpoint: LlmEndpoint): Promise<Call> {
    let runId: string | null = null;
    let agentId = '';
    if (principal?.kind === 'run') {
      if (runIdHeader && runIdHeader !== principal.runId) {
        throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: 'x-run-id does not match the run token' });
      }
      runId = principal.runId;
      agentId = principal.agentId;
    } else if (principal?.kind === 'key') {
      if (runIdHeader) {
        const run = await findRun(this.#opts.orm.em.fork(), runIdHeader);
        if (!seesRun(principal, run)) throw invalidRequest(`run ${runIdHeader} not found`, 'x-run-id');
        runId = runIdHeader;
        agentId = run!.rootAgentId;
      }
    } else {
      throw unauthenticated();
    }
    const model = String(json.model);
    const accounted = await this.#ask(principal.tenantId, runId, agentId, model);
    return newCall({ api: endpoint.api, runId, tenantId: principal.tenantId, accounted, model, stream, ...(agentId && { agentId }) });
  }

  /**
   * Asks the tenant's policy whether the model may be called (by this agent),
   * and refuses the call once a token budget is used up. Answers whether the
   * call's tokens are to be counted.
   */
  async #ask(tenantId: string, runId: string | null, agentId: string, model: string): Promise<boolean> {
    const policy = this.#opts.policy(tenantId);
    const verdict = decide(policy, { tool: model, args: {}, agentId, permissionLevel: 'PUBLIC', tenantId, action: 'llm_call' });
    if (verdict.decision !== 'allow') {
      const why = verdict.decision === 'require_approval' ? `${verdict.reason} (an LLM call cannot wait for an approval)` : verdict.reason;
      await this.#refuse(runId, new AbcError('PERMISSION_DENIED', {
        code: 'blocked',
        category: 'COMPLIANCE',
        message: `the policy does not allow model ${model}: ${why}`,
        details: { model, ...verdictRecord(verdict) },
      }));
    }
    const budgets = budgetsOf(policy, tenantId);
    const budgeted = Boolean(budgets.run_tokens || budgets.tenant_tokens_per_day);
    if (budgeted) await this.#checkBudgets(tenantId, runId, budgets);
    return budgeted || runId !== null;
  }

  /** Refuses a call once its run or its tenant has used up a token budget. */
  async #checkBudgets(tenantId: string, runId: string | null, budgets: TokenBudgets): Promise<void> {
    const spent = await tokensSpent(this.#opts.orm.em.fork(), tenantId, runId);
    const over =
      runId && budgets.run_tokens && spent.run >= budgets.run_tokens
        ? { budget: 'run_tokens', limit: budgets.run_tokens, used: spent.run }
        : budgets.tenant_tokens_per_day && spent.tenantToday >= budgets.tenant_tokens_per_day
          ? { budget: 'tenant_tokens_per_day', limit: budgets.tenant_tokens_per_day, used: spent.tenantToday }
          : undefined;
    if (!over) return;
    await this.#refuse(runId, new AbcError('RESOURCE_EXHAUSTED', {
      code: 'budget_exhausted',
      category: 'COMPLIANCE',
      message: `the ${over.budget === 'run_tokens' ? "run's" : "tenant's daily"} token budget is used up (${over.used} of ${over.limit} tokens)`,
      retryable: false,
      details: over,
    }));
  }

  /** Records a refused call on its run (a policy_decision event), then throws the refusal. */
  async #refuse(runId: string | null, error: AbcError): Promise<never> {
    if (runId) {
      const payload = { action: 'llm_call', decision: 'block', code: error.payload.code, reason: error.payload.message, ...error.payload.details };
      await this.#opts.orm.em.fork().transactional((tx) => appendEvents(tx, runId, [{ type: 'policy_decision', payload }]));
    }
    throw error;
  }

  #record(call: Call, event: { type: string; payload: Record<string, unknown> }): EventWriter | null {
    if (!call.runId) return null;
    let entry = this.#writers.get(call.runId);
    if (!entry) {
      entry = { writer: new EventWriter(this.#opts.appender, call.runId, { onlyIfActive: false }), users: 0 };
      this.#writers.set(call.runId, entry);
    }
    entry.users++;
    entry.writer.push(event);
    return entry.writer;
  }

  #retried(call: Call, a: Attempt): void {
    call.attempts++;
    this.#log.warn({ requestId: call.requestId, model: a.model, attempt: a.attempt, error: a.error.message }, 'LLM call failed before the first byte; retrying');
  }

  /**
   * A `fetch` for the `openai` SDK inside the core (LLM-backed engine roles and
   * plan steps of a tenant's tickets): the proxy's own upstream path, with its
   * retries and fallbacks, under the tenant's policy (models, budgets) like any
   * call. Each call's record goes to `onCall` instead of a run's event log. A
   * refusal is thrown: the SDK passes it on as the `cause` of its error.
   */
  internalFetch(tenantId: string, onCall?: (record: Record<string, unknown>) => void): typeof fetch {
    return async (url, init) => {
      const endpoint = endpointOf(String(url));
      const body = Buffer.from(typeof init?.body === 'string' ? init.body : '{}');
      const json = parseBody(body, endpoint);
      const call = newCall({ api: endpoint.api, runId: null, tenantId, accounted: true, model: String(json.model), stream: false });
      try {
        await this.#ask(tenantId, null, '', call.model);
        const res = await this.#upstream().complete(endpoint.path, body, json, { signal: init?.signal ?? new AbortController().signal, onRetry: (a) => this.#retried(call, a), traceparent: call.traceparent });
        call.servedBy = res.model;
        call.usage = endpoint.usage(parseJson(res.body));
        observeCall(call, null);
        onCall?.(callRecord(call, null));
        const tokens = call.usage?.total_tokens;
        if (tokens) this.#account(call, tokens);
        return new Response(res.body, { status: res.status, headers: res.headers });
      } catch (error) {
        observeCall(call, error);
        onCall?.(callRecord(call, error));
        if (error instanceof UpstreamError && error.kind === 'http' && error.body) return new Response(error.body, { status: error.status, headers: error.headers });
        throw error;
      }
    };
  }

  /** Records llm_call_done off the response path; close() waits for it. */
  #finish(call: Call, writer: EventWriter | null, error: unknown): void {
    observeCall(call, error);
    const payload = callRecord(call, error);
    const tokens = call.usage?.total_tokens;
    if (call.accounted && tokens) this.#account(call, tokens);
    if (!writer) {
      this.#log.debug({ llm_call: payload }, 'llm call');
      return;
    }
    writer.push({ type: 'llm_call_done', payload });
    const pending = writer.flush().catch((e) => this.#log.error({ err: e, requestId: call.requestId }, 'failed to record llm call'));
    this.#pending.add(pending);
    void pending.finally(() => {
      this.#pending.delete(pending);
      const entry = this.#writers.get(call.runId!);
      if (entry && --entry.users === 0) this.#writers.delete(call.runId!);
    });
  }

  /** Counts a call's tokens against its run and its tenant, off the response path. */
  #account(call: Call, tokens: number): void {
    const em = this.#opts.orm.em.fork();
    const pending = (async () => {
      if (call.runId) await addRunTokens(em, call.runId, tokens);
      await addTenantTokens(em, call.tenantId, tokens);
    })().catch((e) => this.#log.error({ err: e, requestId: call.requestId }, 'failed to count tokens'));
    this.#pending.add(pending);
    void pending.finally(() => this.#pending.delete(pending));
  }
}

/** A new call, its span started under the active context: `{operation} {model}`. */
function newCall(c: Pick<Call, 'api' | 'runId' | 'tenantId' | 'accounted' | 'model' | 'stream'> & { agentId?: string }): Call {
  const operation = c.api === 'embeddings' ? 'embeddings' : 'chat';
  const { span, context } = startSpan(`${operation} ${c.model}`, {
    kind: SpanKind.CLIENT,
    attributes: {
      'gen_ai.operation.name': operation,
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': c.model,
      'gen_ai.request.stream': c.stream,
      'abc.llm.api': c.api,
      ...(c.runId && { 'abc.run.id': c.runId }),
      ...(c.agentId && { 'gen_ai.agent.id': c.agentId }),
    },
  });
  return { ...c, requestId: newId('llm'), started: Date.now(), attempts: 1, ttftMs: null, usage: null, servedBy: null, span, traceparent: traceparentOf(context) };
}

/** A call in the metrics and its span: by its served model (else the asked one), API and outcome. */
function observeCall(call: Call, error: unknown): void {
  const model = call.servedBy ?? call.model;
  endCallSpan(call, error);
  metrics.llmCalls.inc({ model, api: call.api, outcome: error ? (error instanceof UpstreamError ? error.kind : 'refused') : 'ok' });
  if (call.usage?.prompt_tokens) metrics.llmTokens.inc({ model, kind: 'prompt' }, call.usage.prompt_tokens);
  if (call.usage?.completion_tokens) metrics.llmTokens.inc({ model, kind: 'completion' }, call.usage.completion_tokens);
  if (call.ttftMs !== null) metrics.llmTtft.observe({ model }, call.ttftMs / 1000);
}

function endCallSpan(call: Call, error: unknown): void {
  const span = call.span;
  span.setAttributes({
    'abc.llm.request_id': call.requestId,
    'abc.llm.attempts': call.attempts,
    ...(call.servedBy && { 'gen_ai.response.model': call.servedBy }),
    ...(call.usage?.prompt_tokens !== undefined && { 'gen_ai.usage.input_tokens': call.usage.prompt_tokens }),
    ...(call.usage?.completion_tokens !== undefined && { 'gen_ai.usage.output_tokens': call.usage.completion_tokens }),
    ...(call.ttftMs !== null && { 'gen_ai.response.time_to_first_chunk': call.ttftMs / 1000 }),
  });
  if (error) failSpan(span, error, { 'error.type': error instanceof UpstreamError ? error.kind : errorCode(error) });
  span.end();
}

const EMPTY = Buffer.alloc(0);

const errorCode = (error: unknown) => (error instanceof AbcError ? error.payload.code : 'error');

/** The llm_call_done payload of a call. */
function callRecord(call: Call, error: unknown): Record<string, unknown> {
  return {
    request_id: call.requestId,
    api: call.api,
    model: call.model,
    served_by: call.servedBy,
    stream: call.stream,
    latency_ms: Date.now() - call.started,
    ttft_ms: call.ttftMs,
    prompt_tokens: call.usage?.prompt_tokens ?? null,
    completion_tokens: call.usage?.completion_tokens ?? null,
    total_tokens: call.usage?.total_tokens ?? null,
    attempts: call.attempts,
    error: error ? errorSummary(error) : null,
  };
}

function startedPayload(call: Call): Record<string, unknown> {
  return { request_id: call.requestId, api: call.api, model: call.model, stream: call.stream };
}

/** A request body: a JSON object with a model, and what its endpoint needs. */
function parseBody(bytes: Uint8Array, endpoint: LlmEndpoint): Record<string, unknown> {
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    throw invalidRequest('the body is not valid JSON', 'body');
  }
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw invalidRequest('the body must be a JSON object', 'body');
  const body = json as Record<string, unknown>;
  if (typeof body.model !== 'string' || !body.model) throw invalidRequest('model is required and must be a string', 'model');
  endpoint.check(body);
  return body;
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
}

function errorSummary(error: unknown): Record<string, unknown> {
  if (error instanceof UpstreamError) return { kind: error.kind, status: error.status, message: error.message };
  return { kind: 'aborted', message: error instanceof Error ? error.message : String(error) };
}

/** An upstream failure as an AbcError; the upstream's HTTP answer rides in details for relay. */
function toAbcError(error: unknown, signal: AbortSignal): AbcError {
  if (error instanceof AbcError) return error;
  if (signal.aborted) return new AbcError('CANCELLED', { code: 'cancelled', message: 'the client went away' });
  if (error instanceof UpstreamError) {
    const details = error.body ? { upstream_status: error.status, upstream_body: error.body.toString('utf8') } : { upstream_status: error.status };
    return error.kind === 'timeout'
      ? new AbcError('DEADLINE_EXCEEDED', { code: 'llm_error', category: 'TIMEOUT', message: error.message, retryable: true, details })
      : new AbcError('UNAVAILABLE', { code: 'llm_error', category: 'EXECUTION', message: error.message, retryable: true, details });
  }
  return AbcError.from(error);
}
