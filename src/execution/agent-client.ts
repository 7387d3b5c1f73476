// Calls an external agent: POST {endpoint}/invoke, SSE back (seed 001 §6).
// Faults are classified; a fault before the first byte of the stream is retried
// with backoff, a fault after it never is, so no delta is ever duplicated.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { errors, request, type Dispatcher } from 'undici';
import { DEFAULT_RETRY, type RetryPolicy } from '../domain/backoff.js';
import { withRetry } from './retry.js';

import type { AgentEvent } from '../ports/builtin-agent.js';

export type { AgentEvent };

export type AgentFaultReason = 'http_status' | 'malformed_sse' | 'no_done' | 'connection' | 'timeout';

/** An agent misbehaved. `beforeFirstByte` says whether a retry is safe. */
export class AgentFault extends Error {
  constructor(
    readonly reason: AgentFaultReason,
    message: string,
    readonly beforeFirstByte: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'AgentFault';
  }
}

export interface InvokeRequest {
  endpoint: string;
  authToken?: string | null;
  headers: Record<string, string>;
  body: unknown;
  signal: AbortSignal;
  /** No byte from the agent for this long is a timeout. */
  idleTimeoutMs: number;
  retry?: RetryPolicy;
  onRetry?: (fault: AgentFault, attempt: number, delayMs: number) => void;
}

/** Streams the agent's events until `done` or `error`; throws AgentFault on any protocol fault. */
export async function* invokeAgent(req: InvokeRequest): AsyncGenerator<AgentEvent> {
  const body = await withRetry(
    req.retry ?? DEFAULT_RETRY,
    () => open(req),
    (error) => error instanceof AgentFault && error.beforeFirstByte && retryableStatus(error),
    { signal: req.signal, onRetry: (e, n, d) => req.onRetry?.(e as AgentFault, n, d) },
  );
  yield* read(body, req);
}

function retryableStatus(fault: AgentFault): boolean {
  if (fault.reason !== 'http_status') return true;
  const status = Number(/HTTP (\d+)/.exec(fault.message)?.[1]);
  return status === 429 || status >= 500;
}

async function open(req: InvokeRequest): Promise<Dispatcher.ResponseData['body']> {
  let res: Dispatcher.ResponseData;
  try {
    res = await request(`${req.endpoint.replace(/\/$/, '')}/invoke`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        ...(req.authToken && { authorization: `Bearer ${req.authToken}` }),
        ...req.headers,
      },
      body: JSON.stringify(req.body),
      signal: req.signal,
      // No byte for this long, before the headers or between body chunks, is a timeout.
      headersTimeout: req.idleTimeoutMs,
      bodyTimeout: req.idleTimeoutMs,
    });
  } catch (error) {
    if (req.signal.aborted) throw error;
    if (error instanceof errors.HeadersTimeoutError) throw new AgentFault('timeout', `agent did not answer within ${req.idleTimeoutMs} ms`, true, { cause: error });
    throw new AgentFault('connection', `cannot reach agent: ${describe(error)}`, true, { cause: error });
  }
  if (res.statusCode < 200 || res.statusCode > 299) {
    const text = await res.body.text().catch(() => '');
    throw new AgentFault('http_status', `agent answered HTTP ${res.statusCode}${text ? `: ${text.slice(0, 200)}` : ''}`, true);
  }
  return res.body;
}

async function* read(body: Dispatcher.ResponseData['body'], req: InvokeRequest): AsyncGenerator<AgentEvent> {
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => queue.push(event) });
  const decoder = new TextDecoder();
  let received = false;
  try {
    // Not `for await`: its early return destroys the body with an AbortError built each time.
    const chunks = (body as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
    for (let next = await chunks.next(); !next.done; next = await chunks.next()) {
      const chunk = next.value;
      received = true;
      parser.feed(decoder.decode(chunk, { stream: true }));
      while (queue.length) {
        const event = parseEvent(queue.shift()!);
        yield event;
        if (event.type === 'done' || event.type === 'error') return;
      }
    }
  } catch (error) {
    if (error instanceof AgentFault || req.signal.aborted) throw error;
    if (error instanceof errors.BodyTimeoutError) throw new AgentFault('timeout', `agent sent nothing for ${req.idleTimeoutMs} ms`, false, { cause: error });
    throw new AgentFault('connection', `agent stream broke: ${describe(error)}`, !received, { cause: error });
  } finally {
    body.destroy();
  }
  throw new AgentFault('no_done', 'agent stream ended without a done event', !received);
}

function parseEvent(message: EventSourceMessage): AgentEvent {
  let data: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(message.data);
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
    data = parsed as Record<string, unknown>;
  } catch {
    throw new AgentFault('malformed_sse', `agent sent ${message.event ?? 'message'} data that is not a JSON object`, false);
  }
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  const obj = (v: unknown) => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
  switch (message.event) {
    case 'delta':
      if (typeof data.text !== 'string') throw new AgentFault('malformed_sse', 'delta event without a string "text"', false);
      return { type: 'delta', text: data.text };
    case 'state':
      if (typeof data.state !== 'string') throw new AgentFault('malformed_sse', 'state event without a string "state"', false);
      return { type: 'state', state: data.state, detail: obj(data.detail) };
    case 'done':
      return { type: 'done', usage: obj(data.usage), finalMessage: str(data.final_message) };
    case 'error':
      return { type: 'error', code: str(data.code) ?? 'agent_error', message: str(data.message) ?? 'agent reported an error' };
    default:
      throw new AgentFault('malformed_sse', `unknown agent event "${message.event ?? 'message'}"`, false);
  }
}

function describe(error: unknown): string {
  const e = error as { message?: string; cause?: { code?: string; message?: string } };
  return e.cause?.code ?? e.cause?.message ?? e.message ?? String(error);
}
