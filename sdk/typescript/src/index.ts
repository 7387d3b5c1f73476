// ABC's TypeScript SDK for agents (@abc-platform/agent-sdk): serve /invoke and
// /health, call tools (invoke, then wait), the LLM proxy and other agents, all
// through ABC with the run's scoped token and trace.
import http from 'node:http';
import { createParser } from 'eventsource-parser';
import OpenAI from 'openai';

export interface InvokeBody {
  agent_id: string;
  session_id: string;
  run_id: string;
  input_message: { role: string; content: string };
  messages: { role: string; content: string }[];
  context: Record<string, unknown>;
}

/**
 * Why and from where an invoke continues a run (`context.resume`): its core
 * was lost mid-stream (`executor_lost`), or it waited on a human or a client.
 */
export interface ResumeInfo {
  reason: string;
  /** The text the run's clients already have. */
  streamed_text: string;
  streamed_chars: number;
  /** The cursor of the run's last event. */
  last_cursor: string;
  /** The tool calls already made, with their outcomes. */
  tool_calls: { tool_call_id: string; tool_name: string; args: Record<string, unknown>; status: string; result?: unknown; error?: unknown }[];
}

export class ToolError extends Error {
  constructor(readonly code: string, message: string, readonly toolCallId: string) {
    super(message);
    this.name = 'ToolError';
  }
}

/** What an agent may do while handling one invoke. */
export class RunContext {
  readonly runId: string;
  readonly sessionId: string;
  readonly baseUrl: string;
  /** The invoke's W3C traceparent: every call back to ABC carries it, so the run's trace is one tree. */
  readonly traceparent: string | undefined;
  /** Set when this invoke continues a run (`context.resume`). */
  readonly resume: ResumeInfo | undefined;
  /** What of the text already delivered a resumed handler has yet to repeat. */
  #delivered: string;
  readonly #token: string;
  readonly #res: http.ServerResponse;
  #llm: OpenAI | undefined;

  constructor(headers: http.IncomingHttpHeaders, res: http.ServerResponse, readonly body: InvokeBody) {
    this.runId = String(headers['x-run-id']);
    this.sessionId = String(headers['x-session-id']);
    this.baseUrl = String(headers['x-platform-base-url']).replace(/\/$/, '');
    this.#token = String(headers['x-abc-run-token']);
    this.traceparent = typeof headers.traceparent === 'string' ? headers.traceparent : undefined;
    this.resume = body.context?.resume as ResumeInfo | undefined;
    this.#delivered = this.resume?.streamed_text ?? '';
    this.#res = res;
  }

  /**
   * Streams a piece of the answer to the user. After a takeover, a handler
   * that is a function of the transcript streams its answer again from the
   * start: the part its user already has is not sent twice.
   */
  delta(text: string): void {
    if (this.#delivered) {
      const repeated = this.#delivered.startsWith(text) ? text : text.startsWith(this.#delivered) ? this.#delivered : '';
      this.#delivered = repeated ? this.#delivered.slice(repeated.length) : '';
      text = text.slice(repeated.length);
      if (!text) return;
    }
    this.#send('delta', { text, run_id: this.runId });
  }

  /** Reports progress, e.g. `state('thinking', {step: 'planning'})`. */
  state(state: string, detail: Record<string, unknown> = {}): void {
    this.#send('state', { state, detail });
  }

  /** The stock openai client, pointed at ABC's proxy and linked to this run. */
  get llm(): OpenAI {
    this.#llm ??= new OpenAI({ baseURL: `${this.baseUrl}/v1`, apiKey: this.#token, defaultHeaders: { 'x-run-id': this.runId, ...this.#trace() } });
    return this.#llm;
  }

  /**
   * Calls a tool and waits for its result, through approvals and client tools.
   * Throws ToolError when the call fails, is blocked, rejected or times out.
   */
  async invokeTool(name: string, args: Record<string, unknown>, opts: { idempotencyKey?: string; timeoutMs?: number } = {}): Promise<unknown> {
    let outcome = await this.#post(`/v1/tools/${encodeURIComponent(name)}:invoke`, {
      run_id: this.runId,
      args,
      ...(opts.idempotencyKey && { idempotency_key: opts.idempotencyKey }),
      ...(opts.timeoutMs && { timeout_ms: opts.timeoutMs }),
    });
    const id = outcome.tool_call_id as string;
    while (outcome.status === 'pending' || ['created', 'policy_checked', 'waiting_approval', 'approved', 'dispatched', 'running'].includes(outcome.status)) {
      outcome = await this.#post(`/v1/tool_calls/${id}:wait?timeout_ms=30000`, undefined);
    }
    if (outcome.status === 'succeeded') return outcome.result;
    throw new ToolError(outcome.error?.code ?? outcome.status, outcome.error?.message ?? outcome.status, id);
  }

  /** Calls another agent as a child of this run; yields its SSE events as they arrive. */
  async *invokeAgent(agentId: string, content: string): AsyncGenerator<{ event: string; data: any }> {
    const res = await fetch(`${this.baseUrl}/v1/agents/${encodeURIComponent(agentId)}:invoke`, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.#token}`, 'content-type': 'application/json', ...this.#trace() },
      body: JSON.stringify({ parent_run_id: this.runId, input_message: { role: 'user', content } }),
    });
    if (!res.ok || !res.body) throw new ToolError('agent_error', `calling ${agentId} failed: HTTP ${res.status} ${await res.text()}`, '');
    const queue: { event: string; data: any }[] = [];
    const parser = createParser({ onEvent: (e) => queue.push({ event: e.event ?? 'message', data: JSON.parse(e.data) }) });
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      parser.feed(decoder.decode(chunk, { stream: true }));
      while (queue.length) yield queue.shift()!;
    }
  }

  #trace(): Record<string, string> {
    return this.traceparent ? { traceparent: this.traceparent } : {};
  }

  async #post(path: string, body: unknown): Promise<any> {
    const res = await fetch(`${this.baseUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.#token}`, ...(body !== undefined && { 'content-type': 'application/json' }), ...this.#trace() },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await res.json()) as Record<string, any>;
    if (!res.ok) throw new ToolError(json.error?.code ?? 'error', json.error?.message ?? `HTTP ${res.status}`, '');
    return json;
  }

  #send(event: string, data: unknown): void {
    if (!this.#res.headersSent) this.#res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    this.#res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  /** @internal */
  finish(finalMessage: string, usage: Record<string, unknown>): void {
    this.#send('done', { usage, final_message: finalMessage });
    this.#res.end();
  }

  /** @internal */
  fail(code: string, message: string): void {
    this.#send('error', { code, message });
    this.#res.end();
  }
}

export type AgentHandler = (ctx: RunContext, signal: AbortSignal) => Promise<{ finalMessage: string; usage?: Record<string, unknown> }>;

/** An HTTP server speaking the agent protocol: POST /invoke (SSE) and GET /health. */
export function createAgentServer(handler: AgentHandler, info: { version?: string; capabilities?: string[] } = {}): http.Server {
  return http.createServer(async (req, res) => {
    if (req.method === 'GET' && req.url === '/health') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ status: 'healthy', version: info.version ?? '1.0.0', capabilities: info.capabilities ?? ['streaming'] }));
    }
    if (req.method !== 'POST' || req.url !== '/invoke') return res.writeHead(404).end();
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const ctx = new RunContext(req.headers, res, JSON.parse(raw) as InvokeBody);
    const aborted = new AbortController();
    res.on('close', () => aborted.abort()); // ABC cancelled the run
    try {
      const { finalMessage, usage } = await handler(ctx, aborted.signal);
      if (!aborted.signal.aborted) ctx.finish(finalMessage, usage ?? {});
    } catch (error) {
      if (!aborted.signal.aborted) ctx.fail(error instanceof ToolError ? error.code : 'agent_failed', (error as Error).message);
    }
  });
}
