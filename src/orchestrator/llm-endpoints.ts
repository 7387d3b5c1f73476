// The OpenAI endpoints the LLM proxy relays, and what differs between them:
// the field a request needs, where an answer reports its token usage, and how
// a stream does.
import { invalidRequest } from '../domain/errors.js';
import type { LlmPath } from '../execution/llm-upstream.js';

/** Token usage as ABC records it, in chat completions' names. */
export interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
}

export interface LlmEndpoint {
  /** The API's name on records: `chat.completions`, `responses`, `embeddings`. */
  api: string;
  path: LlmPath;
  /** Throws `invalid_request` naming the field a body lacks or has wrong (besides `model`). */
  check(body: Record<string, unknown>): void;
  /** The usage of a whole answer. */
  usage(answer: unknown): Usage | null;
  /**
   * For a stream: the usage an event carries, and whether the event exists
   * only to carry it. Chat completions report usage only when asked, so the
   * proxy asks (`askUsage`) and drops that event for a client that did not.
   */
  streamUsage?(data: string): { usage: Usage; only: boolean } | null;
  askUsage?(body: Record<string, unknown>): Record<string, unknown> | undefined;
}

const isText = (v: unknown) => typeof v === 'string' || Array.isArray(v);

export const CHAT: LlmEndpoint = {
  api: 'chat.completions',
  path: '/chat/completions',
  check(body) {
    if (!Array.isArray(body.messages) || body.messages.length === 0) throw invalidRequest('messages must be a non-empty array', 'messages');
  },
  usage: (answer) => (answer as { usage?: Usage } | null)?.usage ?? null,
  streamUsage(data) {
    if (!data.includes('"usage"')) return null;
    const chunk = parse(data) as { usage?: Usage; choices?: unknown[] } | null;
    return chunk?.usage ? { usage: chunk.usage, only: !chunk.choices?.length } : null;
  },
  askUsage(body) {
    const options = body.stream_options as { include_usage?: boolean } | undefined;
    return options?.include_usage === true ? undefined : { ...body, stream_options: { ...options, include_usage: true } };
  },
};

/** The Responses API: usage in `input_tokens`/`output_tokens`, and on a stream in `response.completed`. */
export const RESPONSES: LlmEndpoint = {
  api: 'responses',
  path: '/responses',
  check(body) {
    if (body.input !== undefined && !isText(body.input)) throw invalidRequest('input must be a string or an array of input items', 'input');
  },
  usage: (answer) => responseUsage((answer as { usage?: ResponseUsage } | null)?.usage),
  streamUsage(data) {
    if (!data.includes('"response.completed"')) return null;
    const event = parse(data) as { type?: string; response?: { usage?: ResponseUsage } } | null;
    const usage = event?.type === 'response.completed' ? responseUsage(event.response?.usage) : null;
    return usage ? { usage, only: false } : null;
  },
};

export const EMBEDDINGS: LlmEndpoint = {
  api: 'embeddings',
  path: '/embeddings',
  check(body) {
    if (!isText(body.input) || (body.input as string | unknown[]).length === 0) throw invalidRequest('input must be a non-empty string or array', 'input');
  },
  usage: (answer) => (answer as { usage?: Usage } | null)?.usage ?? null,
};

interface ResponseUsage {
  input_tokens?: number;
  output_tokens?: number;
  total_tokens?: number;
}

function responseUsage(u: ResponseUsage | undefined): Usage | null {
  return u ? { prompt_tokens: u.input_tokens, completion_tokens: u.output_tokens, total_tokens: u.total_tokens } : null;
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** The endpoint of a URL the core's own `openai` clients call (`…/v1/responses`). */
export function endpointOf(url: string): LlmEndpoint {
  const path = new URL(url, 'http://core').pathname;
  return path.endsWith('/responses') ? RESPONSES : path.endsWith('/embeddings') ? EMBEDDINGS : CHAT;
}
