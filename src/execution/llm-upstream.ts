// The LLM router client: a byte-exact pass-through of OpenAI-compatible calls
// (chat completions, responses, embeddings). Retries (seed 001 §10.2) on
// connection errors, timeouts, 429 and 5xx, only before the first byte reaches
// the client; then the fallback models in order.
import type { IncomingHttpHeaders } from 'node:http';
import { createParser } from 'eventsource-parser';
import { errors, Pool, type Dispatcher } from 'undici';
import type { RetryPolicy } from '../domain/backoff.js';
import { withRetry } from './retry.js';

export interface UpstreamOptions {
  baseUrl: string;
  apiKey?: string;
  timeoutMs: number;
  retry: RetryPolicy;
  fallbacks: Record<string, string[]>;
}

/** A failed upstream call. `status`/`body` are the upstream's own answer when it gave one. */
export class UpstreamError extends Error {
  constructor(
    message: string,
    readonly kind: 'http' | 'connection' | 'timeout' | 'stream_cut',
    readonly status: number,
    readonly body?: Buffer,
    readonly headers: Record<string, string> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'UpstreamError';
  }

  get retryable(): boolean {
    return this.kind !== 'http' || this.status === 429 || this.status >= 500;
  }
}

export interface Attempt {
  model: string;
  attempt: number;
  error: UpstreamError;
  delayMs?: number;
}

export interface CallOptions {
  signal: AbortSignal;
  onRetry?: (a: Attempt) => void;
  /** The W3C traceparent the router gets: the call's span. */
  traceparent?: string;
}

/** The OpenAI paths the proxy relays. */
export type LlmPath = '/chat/completions' | '/responses' | '/embeddings';

/** One server-sent event of a stream: its data, and its name when it has one (the Responses API names every event). */
export interface SseEvent {
  event?: string;
  data: string;
}

/**
 * How a stream ends well: chat completions with `[DONE]`; the Responses API
 * with its terminal event (`response.completed`, `.failed` or `.incomplete`),
 * with or without `[DONE]` after it.
 */
const TERMINAL = /"type"\s*:\s*"response\.(completed|failed|incomplete)"/;
const ends = (path: LlmPath, e: SseEvent) => path === '/responses' && TERMINAL.test(e.data);

/** The events one socket read brought, and the model that serves them. */
export interface SseBatch {
  model: string;
  events: SseEvent[];
}

export interface UpstreamResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  model: string;
}

/** Response headers a client may rely on; hop-by-hop and length headers are not copied. */
const RELAYED_HEADERS = ['content-type', 'openai-model', 'openai-organization', 'openai-processing-ms', 'openai-version', 'x-request-id', 'x-ratelimit-limit-requests', 'x-ratelimit-limit-tokens', 'x-ratelimit-remaining-requests', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-requests', 'x-ratelimit-reset-tokens', 'retry-after'];

export function relayedHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of RELAYED_HEADERS) {
    const value = headers[name];
    if (typeof value === 'string') out[name] = value;
  }
  return out;
}

type Response = Dispatcher.ResponseData;

const ok = (res: Response) => res.statusCode >= 200 && res.statusCode < 300;

/** The router's OpenAI base URL: LLM_ROUTER_URL, with `/v1` added unless present. */
export function routerBase(url: string): string {
  const base = url.replace(/\/$/, '');
  return base.endsWith('/v1') ? base : `${base}/v1`;
}

export class LlmUpstream {
  readonly #opts: UpstreamOptions;
  /** The router's path prefix, such as `/v1`. */
  readonly #base: string;
  // An undici pool with keep-alive: about half the CPU per call of node:http, and its
  // headers and body timeouts are the idle timeouts this client needs.
  readonly #pool: Pool;

  constructor(opts: UpstreamOptions) {
    this.#opts = opts;
    const url = new URL(routerBase(opts.baseUrl));
    this.#base = url.pathname;
    this.#pool = new Pool(url.origin, { connections: 256, headersTimeout: opts.timeoutMs, bodyTimeout: opts.timeoutMs });
  }

  close(): void {
    void this.#pool.destroy();
  }

  /** The models to try for `model`: itself, then its fallbacks. */
  chain(model: string): string[] {
    return [model, ...(this.#opts.fallbacks[model] ?? [])];
  }

  /** A non-streaming call; the body comes back exactly as the upstream sent it. */
  async complete(path: LlmPath, body: Buffer, json: Record<string, unknown>, opts: CallOptions): Promise<UpstreamResponse> {
    return this.#withFallbacks(body, json, opts, async (payload, model) => {
      const res = await this.#request('POST', path, payload, opts.signal, opts.traceparent);
      const bytes = await readAll(res, this.#opts.timeoutMs);
      if (!ok(res)) throw new UpstreamError(`upstream answered HTTP ${res.statusCode}`, 'http', res.statusCode, bytes, relayedHeaders(res.headers));
      return { status: res.statusCode, headers: relayedHeaders(res.headers), body: bytes, model };
    });
  }

  /**
   * A streaming call. Yields the SSE events (chunks' JSON) of each socket read
   * as one batch, as they arrive. Failures before the first batch are retried
   * and fall back; after it they throw `stream_cut`.
   */
  async *stream(path: LlmPath, body: Buffer, json: Record<string, unknown>, opts: CallOptions): AsyncGenerator<SseBatch> {
    const { model, first, reads } = await this.#withFallbacks(body, json, opts, async (payload, model) => {
      const res = await this.#request('POST', path, payload, opts.signal, opts.traceparent);
      if (!ok(res)) {
        const bytes = await readAll(res, this.#opts.timeoutMs);
        throw new UpstreamError(`upstream answered HTTP ${res.statusCode}`, 'http', res.statusCode, bytes, relayedHeaders(res.headers));
      }
      // Wait for the first events before committing to this upstream, so an early cut is still retried.
      const reads = readSse(res, opts.signal, this.#opts.timeoutMs);
      const first = await reads.next();
      if (first.done && !first.value) throw new UpstreamError('upstream stream ended before any chunk', 'stream_cut', 502);
      return { model, first, reads };
    });
    try {
      let next = first;
      let ended = false;
      while (!next.done) {
        ended = ends(path, next.value[next.value.length - 1]!);
        yield { model, events: next.value };
        next = await reads.next();
      }
      // A stream ends well with [DONE], or (Responses) with its final event.
      if (!next.value && !ended) throw new UpstreamError(`upstream stream ended without ${path === '/responses' ? 'its final event' : '[DONE]'}`, 'stream_cut', 502);
    } finally {
      // Ends the reader however this stream ends: a finished response keeps its connection.
      await reads.return(false);
    }
  }

  /** GET /v1/models, relayed. */
  async models(signal: AbortSignal): Promise<{ status: number; body: Buffer }> {
    const res = await this.#request('GET', '/models', null, signal).catch((e) => Promise.reject(classify(e, signal, this.#opts.timeoutMs)));
    return { status: res.statusCode, body: await readAll(res, this.#opts.timeoutMs) };
  }

  async #withFallbacks<T>(body: Buffer, json: Record<string, unknown>, opts: CallOptions, attempt: (payload: Buffer, model: string) => Promise<T>): Promise<T> {
    const models = this.chain(String(json.model));
    let last: unknown;
    for (const [i, model] of models.entries()) {
      // The caller's bytes go out untouched; a fallback changes only `model`.
      const payload = i === 0 ? body : Buffer.from(JSON.stringify({ ...json, model }));
      try {
        return await withRetry(this.#opts.retry, () => attempt(payload, model).catch((e) => Promise.reject(classify(e, opts.signal, this.#opts.timeoutMs))), isRetryable, {
          signal: opts.signal,
          onRetry: (error, n, delayMs) => opts.onRetry?.({ model, attempt: n + 1, error: error as UpstreamError, delayMs }),
        });
      } catch (error) {
        last = error;
        if (opts.signal.aborted || !isRetryable(error)) throw error;
      }
    }
    throw last;
  }

  #auth(): Record<string, string> {
    return this.#opts.apiKey ? { authorization: `Bearer ${this.#opts.apiKey}` } : {};
  }

  /** Sends a request; resolves at the response headers. The pool's timeouts bound every wait. */
  #request(method: 'GET' | 'POST', path: string, payload: Buffer | null, signal: AbortSignal, traceparent?: string): Promise<Response> {
    const headers: Record<string, string> = { accept: 'application/json, text/event-stream', ...this.#auth() };
    if (payload) headers['content-type'] = 'application/json';
    if (traceparent) headers.traceparent = traceparent;
    return this.#pool.request({ method, path: `${this.#base}${path}`, headers, body: payload, signal });
  }
}

const isRetryable = (error: unknown) => error instanceof UpstreamError && error.retryable;

function classify(error: unknown, signal: AbortSignal, timeoutMs: number): unknown {
  if (error instanceof UpstreamError || signal.aborted) return error;
  if (error instanceof errors.HeadersTimeoutError) return new UpstreamError(`upstream did not answer within ${timeoutMs} ms`, 'timeout', 504, undefined, {}, { cause: error });
  if (error instanceof errors.ConnectTimeoutError) return new UpstreamError('cannot connect to the LLM router in time', 'timeout', 504, undefined, {}, { cause: error });
  return new UpstreamError(`cannot reach the LLM router: ${(error as Error).message}`, 'connection', 502, undefined, {}, { cause: error });
}

/** The whole body. A cut connection or the idle timeout rejects. */
async function readAll(res: Response, timeoutMs: number): Promise<Buffer> {
  try {
    return Buffer.from(await res.body.arrayBuffer());
  } catch (error) {
    throw bodyError(error as Error, 'connection', timeoutMs);
  }
}

function bodyError(error: Error, kind: 'connection' | 'stream_cut', timeoutMs: number): UpstreamError {
  if (error instanceof errors.BodyTimeoutError) return new UpstreamError(`upstream sent nothing for ${timeoutMs} ms`, 'timeout', 504, undefined, {}, { cause: error });
  return new UpstreamError(`upstream ${kind === 'stream_cut' ? 'stream' : 'body'} broke: ${error.message}`, kind, 502, undefined, {}, { cause: error });
}

/**
 * The SSE events of a response, a batch per socket read that completes any,
 * up to `[DONE]`; it returns whether `[DONE]` came. The pool's body timeout
 * bounds each read.
 */
async function* readSse(res: Response, signal: AbortSignal, timeoutMs: number): AsyncGenerator<SseEvent[], boolean> {
  let parsed: SseEvent[] = [];
  const parser = createParser({ onEvent: (e) => parsed.push(e.event ? { event: e.event, data: e.data } : { data: e.data }) });
  const decoder = new TextDecoder();
  const iterator = res.body[Symbol.asyncIterator]();
  /** How the read ended: the body's end, or `[DONE]` with the body's end still to come. */
  let end: 'body' | 'done' | undefined;
  try {
    for (;;) {
      let next: IteratorResult<Buffer>;
      try {
        next = await iterator.next();
      } catch (error) {
        if (error instanceof UpstreamError || signal.aborted) throw error;
        throw bodyError(error as Error, 'stream_cut', timeoutMs);
      }
      if (next.done) break;
      parser.feed(decoder.decode(next.value, { stream: true }));
      if (!parsed.length) continue;
      const events = parsed;
      parsed = [];
      const done = events.findIndex((e) => e.data === '[DONE]');
      if (done < 0) {
        yield events;
        continue;
      }
      // Anything after [DONE] is not relayed.
      end = 'done';
      if (done > 0) yield events.slice(0, done);
      return true;
    }
    end = 'body';
    return false;
  } finally {
    // A finished response keeps its connection for reuse: after [DONE] only its end is left
    // to read (the pool's body timeout bounds the wait).
    if (end === 'done' && !signal.aborted) void res.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
    else if (end !== 'body') res.body.destroy();
  }
}
