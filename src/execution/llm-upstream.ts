// The LLM router client: a byte-exact pass-through of OpenAI-compatible calls.
// Retries (seed 001 §10.2) on connection errors, timeouts, 429 and 5xx, only
// before the first byte reaches the client; then the fallback models in order.
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import https from 'node:https';
import { createParser } from 'eventsource-parser';
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

const ok = (res: IncomingMessage) => res.statusCode! >= 200 && res.statusCode! < 300;

/** The router's OpenAI base URL: LLM_ROUTER_URL, with `/v1` added unless present. */
export function routerBase(url: string): string {
  const base = url.replace(/\/$/, '');
  return base.endsWith('/v1') ? base : `${base}/v1`;
}

export class LlmUpstream {
  readonly #opts: UpstreamOptions;
  readonly #url: string;
  // node:http with keep-alive: measurably faster than fetch for a hot proxy path.
  readonly #agent: http.Agent;

  constructor(opts: UpstreamOptions) {
    this.#opts = opts;
    this.#url = routerBase(opts.baseUrl);
    this.#agent = new (this.#url.startsWith('https:') ? https.Agent : http.Agent)({ keepAlive: true, maxSockets: 256 });
  }

  close(): void {
    this.#agent.destroy();
  }

  /** The models to try for `model`: itself, then its fallbacks. */
  chain(model: string): string[] {
    return [model, ...(this.#opts.fallbacks[model] ?? [])];
  }

  /** A non-streaming call; the body comes back exactly as the upstream sent it. */
  async complete(body: Buffer, json: Record<string, unknown>, opts: CallOptions): Promise<UpstreamResponse> {
    return this.#withFallbacks(body, json, opts, async (payload, model) => {
      const res = await this.#request('POST', '/chat/completions', payload, opts.signal);
      const bytes = await readAll(res, this.#opts.timeoutMs);
      if (!ok(res)) throw new UpstreamError(`upstream answered HTTP ${res.statusCode}`, 'http', res.statusCode!, bytes, relayedHeaders(res.headers));
      return { status: res.statusCode!, headers: relayedHeaders(res.headers), body: bytes, model };
    });
  }

  /**
   * A streaming call. Yields each SSE data payload (a chunk's JSON) as it arrives.
   * Failures before the first yield are retried and fall back; after it they throw `stream_cut`.
   */
  async *stream(body: Buffer, json: Record<string, unknown>, opts: CallOptions): AsyncGenerator<{ data: string; model: string }> {
    const opened = await this.#withFallbacks(body, json, opts, async (payload, model) => {
      const res = await this.#request('POST', '/chat/completions', payload, opts.signal);
      if (!ok(res)) {
        const bytes = await readAll(res, this.#opts.timeoutMs);
        throw new UpstreamError(`upstream answered HTTP ${res.statusCode}`, 'http', res.statusCode!, bytes, relayedHeaders(res.headers));
      }
      // Wait for the first event before committing to this upstream, so an early cut is still retried.
      const events = readSse(res, this.#opts.timeoutMs, opts.signal);
      const first = await events.next();
      if (first.done) throw new UpstreamError('upstream stream ended before any chunk', 'stream_cut', 502);
      return { model, first: first.value, events };
    });
    if (opened.first === '[DONE]') return;
    yield { data: opened.first, model: opened.model };
    for await (const data of opened.events) {
      if (data === '[DONE]') return;
      yield { data, model: opened.model };
    }
    throw new UpstreamError('upstream stream ended without [DONE]', 'stream_cut', 502);
  }

  /** GET /v1/models, relayed. */
  async models(signal: AbortSignal): Promise<{ status: number; body: Buffer }> {
    const res = await this.#request('GET', '/models', null, signal).catch((e) => Promise.reject(classify(e, signal)));
    return { status: res.statusCode!, body: await readAll(res, this.#opts.timeoutMs) };
  }

  async #withFallbacks<T>(body: Buffer, json: Record<string, unknown>, opts: CallOptions, attempt: (payload: Buffer, model: string) => Promise<T>): Promise<T> {
    const models = this.chain(String(json.model));
    let last: unknown;
    for (const [i, model] of models.entries()) {
      // The caller's bytes go out untouched; a fallback changes only `model`.
      const payload = i === 0 ? body : Buffer.from(JSON.stringify({ ...json, model }));
      try {
        return await withRetry(this.#opts.retry, () => attempt(payload, model).catch((e) => Promise.reject(classify(e, opts.signal))), isRetryable, {
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

  /** Sends a request; resolves at the response headers, within the timeout. */
  #request(method: string, path: string, payload: Buffer | null, signal: AbortSignal): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = { accept: 'application/json, text/event-stream', ...this.#auth() };
      if (payload) Object.assign(headers, { 'content-type': 'application/json', 'content-length': payload.length });
      const req = (this.#url.startsWith('https:') ? https : http).request(`${this.#url}${path}`, { method, headers, agent: this.#agent, signal });
      const timer = setTimeout(() => req.destroy(new UpstreamError(`upstream did not answer within ${this.#opts.timeoutMs} ms`, 'timeout', 504)), this.#opts.timeoutMs);
      req.once('response', (res) => {
        clearTimeout(timer);
        resolve(res);
      });
      req.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      req.end(payload ?? undefined);
    });
  }
}

const isRetryable = (error: unknown) => error instanceof UpstreamError && error.retryable;

function classify(error: unknown, signal: AbortSignal): unknown {
  if (error instanceof UpstreamError || signal.aborted) return error;
  return new UpstreamError(`cannot reach the LLM router: ${(error as Error).message}`, 'connection', 502, undefined, {}, { cause: error });
}

/** Rejects with a timeout when `promise` takes longer than `ms`. */
async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new UpstreamError(`upstream sent nothing for ${ms} ms`, 'timeout', 504)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The whole body; each read must arrive within the idle timeout. */
async function readAll(res: IncomingMessage, idleMs: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  const iterator = res[Symbol.asyncIterator]();
  try {
    for (;;) {
      const next = await withTimeout(iterator.next(), idleMs);
      if (next.done) return Buffer.concat(chunks);
      chunks.push(next.value as Buffer);
    }
  } catch (error) {
    res.destroy();
    if (error instanceof UpstreamError) throw error;
    throw new UpstreamError(`upstream body broke: ${(error as Error).message}`, 'connection', 502, undefined, {}, { cause: error });
  }
}

/** SSE data payloads of a response, each read within the idle timeout. */
async function* readSse(res: IncomingMessage, idleMs: number, signal: AbortSignal): AsyncGenerator<string> {
  const queue: string[] = [];
  const parser = createParser({ onEvent: (e) => queue.push(e.data) });
  const iterator = res[Symbol.asyncIterator]();
  res.setEncoding('utf8');
  try {
    for (;;) {
      while (queue.length) yield queue.shift()!;
      let next: IteratorResult<string>;
      try {
        next = await withTimeout(iterator.next(), idleMs);
      } catch (error) {
        if (error instanceof UpstreamError || signal.aborted) throw error;
        throw new UpstreamError(`upstream stream broke: ${(error as Error).message}`, 'stream_cut', 502, undefined, {}, { cause: error });
      }
      if (next.done) break;
      parser.feed(next.value);
    }
    while (queue.length) yield queue.shift()!;
  } finally {
    if (!res.complete) res.destroy(); // a finished response keeps its socket for reuse
  }
}
