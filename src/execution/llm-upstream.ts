// The LLM router client: a byte-exact pass-through of OpenAI-compatible calls.
// Retries (seed 001 §10.2) on connection errors, timeouts, 429 and 5xx, only
// before the first byte reaches the client; then the fallback models in order.
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

export function relayedHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of RELAYED_HEADERS) {
    const value = headers.get(name);
    if (value !== null) out[name] = value;
  }
  return out;
}

export class LlmUpstream {
  readonly #opts: UpstreamOptions;
  readonly #url: string;

  constructor(opts: UpstreamOptions) {
    this.#opts = opts;
    const base = opts.baseUrl.replace(/\/$/, '');
    this.#url = base.endsWith('/v1') ? base : `${base}/v1`;
  }

  /** The models to try for `model`: itself, then its fallbacks. */
  chain(model: string): string[] {
    return [model, ...(this.#opts.fallbacks[model] ?? [])];
  }

  /** A non-streaming call; the body comes back exactly as the upstream sent it. */
  async complete(body: Buffer, json: Record<string, unknown>, opts: CallOptions): Promise<UpstreamResponse> {
    return this.#withFallbacks(body, json, opts, async (payload, model) => {
      const res = await this.#post('/chat/completions', payload, opts.signal);
      const bytes = Buffer.from(await withTimeout(res.arrayBuffer(), this.#opts.timeoutMs, opts.signal));
      if (!res.ok) throw new UpstreamError(`upstream answered HTTP ${res.status}`, 'http', res.status, bytes, relayedHeaders(res.headers));
      return { status: res.status, headers: relayedHeaders(res.headers), body: bytes, model };
    });
  }

  /**
   * A streaming call. Yields each SSE data payload (a chunk's JSON) as it arrives.
   * Failures before the first yield are retried and fall back; after it they throw `stream_cut`.
   */
  async *stream(body: Buffer, json: Record<string, unknown>, opts: CallOptions): AsyncGenerator<{ data: string; model: string }> {
    const opened = await this.#withFallbacks(body, json, opts, async (payload, model) => {
      const res = await this.#post('/chat/completions', payload, opts.signal);
      if (!res.ok || !res.body) {
        const bytes = Buffer.from(await withTimeout(res.arrayBuffer(), this.#opts.timeoutMs, opts.signal));
        throw new UpstreamError(`upstream answered HTTP ${res.status}`, 'http', res.status, bytes, relayedHeaders(res.headers));
      }
      // Wait for the first event before committing to this upstream, so an early cut is still retried.
      const events = readSse(res.body, this.#opts.timeoutMs, opts.signal);
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
    const res = await fetch(`${this.#url}/models`, { headers: this.#auth(), signal: AbortSignal.any([signal, AbortSignal.timeout(this.#opts.timeoutMs)]) });
    return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
  }

  async #withFallbacks<T>(body: Buffer, json: Record<string, unknown>, opts: CallOptions, attempt: (payload: Buffer, model: string) => Promise<T>): Promise<T> {
    const models = this.chain(String(json.model));
    let last: unknown;
    for (const [i, model] of models.entries()) {
      // The caller's bytes go out untouched; a fallback changes only `model`.
      const payload = i === 0 ? body : Buffer.from(JSON.stringify({ ...json, model }));
      try {
        return await withRetry(this.#opts.retry, (n) => attempt(payload, model).catch((e) => Promise.reject(classify(e, opts.signal))), isRetryable, {
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

  async #post(path: string, payload: Buffer, signal: AbortSignal): Promise<Response> {
    const connect = new AbortController();
    const timer = setTimeout(() => connect.abort(), this.#opts.timeoutMs);
    try {
      return await fetch(`${this.#url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...this.#auth() },
        body: payload,
        signal: AbortSignal.any([signal, connect.signal]),
      });
    } catch (error) {
      if (connect.signal.aborted && !signal.aborted) throw new UpstreamError(`upstream did not answer within ${this.#opts.timeoutMs} ms`, 'timeout', 504);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }
}

const isRetryable = (error: unknown) => error instanceof UpstreamError && error.retryable;

function classify(error: unknown, signal: AbortSignal): unknown {
  if (error instanceof UpstreamError || signal.aborted) return error;
  return new UpstreamError(`cannot reach the LLM router: ${(error as Error).message}`, 'connection', 502, undefined, {}, { cause: error });
}

async function withTimeout<T>(promise: Promise<T>, ms: number, signal: AbortSignal): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new UpstreamError(`upstream sent nothing for ${ms} ms`, 'timeout', 504)), ms);
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** SSE data payloads of a response body, each within the idle timeout. */
async function* readSse(body: ReadableStream<Uint8Array>, idleMs: number, signal: AbortSignal): AsyncGenerator<string> {
  const queue: string[] = [];
  const parser = createParser({ onEvent: (e) => queue.push(e.data) });
  const reader = body.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      while (queue.length) yield queue.shift()!;
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await withTimeout(reader.read(), idleMs, signal);
      } catch (error) {
        if (error instanceof UpstreamError || signal.aborted) throw error;
        throw new UpstreamError(`upstream stream broke: ${(error as Error).message}`, 'stream_cut', 502, undefined, {}, { cause: error });
      }
      if (chunk.done) break;
      parser.feed(decoder.decode(chunk.value, { stream: true }));
    }
    while (queue.length) yield queue.shift()!;
  } finally {
    reader.cancel().catch(() => {});
  }
}
