// A real HTTP server speaking the OpenAI wire format (chat completions, the
// Responses API, embeddings): streams, stalls, fails, cuts.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface LlmRequest {
  /** `/v1/chat/completions`, `/v1/responses` or `/v1/embeddings`. */
  path: string;
  raw: Buffer;
  json: Record<string, any>;
  headers: http.IncomingHttpHeaders;
  closed: Promise<void>;
}

export type LlmBehaviour = (req: LlmRequest, res: ServerResponse) => void | Promise<void>;

export interface FakeLlm {
  url: string;
  requests: LlmRequest[];
  /** TCP connections accepted so far. */
  readonly connections: number;
  behave(b: LlmBehaviour): void;
  close(): Promise<void>;
}

export function completion(model: string, content = 'Hello world') {
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 1704067200,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop', logprobs: null }],
    usage: { prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 },
  };
}

export function chunk(model: string, delta: Record<string, unknown>, finish: string | null = null) {
  return { id: 'chatcmpl-test', object: 'chat.completion.chunk', created: 1704067200, model, choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] };
}

/** Streams `deltas` as chunks, the usage chunk when asked for, then [DONE]. */
export function streamChunks(req: LlmRequest, res: ServerResponse, deltas: Record<string, unknown>[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'x-request-id': 'up-req-1' });
  for (const [i, d] of deltas.entries()) res.write(`data: ${JSON.stringify(chunk(req.json.model, d, i === deltas.length - 1 ? 'stop' : null))}\n\n`);
  if (req.json.stream_options?.include_usage) {
    res.write(`data: ${JSON.stringify({ id: 'chatcmpl-test', object: 'chat.completion.chunk', created: 1704067200, model: req.json.model, choices: [], usage: { prompt_tokens: 7, completion_tokens: deltas.length, total_tokens: 7 + deltas.length } })}\n\n`);
  }
  res.end('data: [DONE]\n\n');
}

/** A Responses API answer: one message with `text`. */
export function response(model: string, text = 'Hello world', status = 'completed') {
  return {
    id: 'resp_test',
    object: 'response',
    created_at: 1704067200,
    status,
    model,
    output: status === 'in_progress' ? [] : [{ id: 'msg_test', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] }],
    usage: status === 'in_progress' ? null : { input_tokens: 9, output_tokens: 2, total_tokens: 11, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } },
  };
}

/** The named events of a streamed Responses API answer, as OpenAI sends them, for `deltas` of text. */
export function responseEvents(model: string, deltas: string[]): { event: string; data: Record<string, unknown> }[] {
  const text = deltas.join('');
  const item = { id: 'msg_test', type: 'message', status: 'in_progress', role: 'assistant', content: [] };
  const part = { type: 'output_text', text: '', annotations: [] };
  const at = { item_id: 'msg_test', output_index: 0, content_index: 0 };
  const events: [string, Record<string, unknown>][] = [
    ['response.created', { response: response(model, '', 'in_progress') }],
    ['response.in_progress', { response: response(model, '', 'in_progress') }],
    ['response.output_item.added', { output_index: 0, item }],
    ['response.content_part.added', { ...at, part }],
    ...deltas.map((delta): [string, Record<string, unknown>] => ['response.output_text.delta', { ...at, delta }]),
    ['response.output_text.done', { ...at, text }],
    ['response.content_part.done', { ...at, part: { ...part, text } }],
    ['response.output_item.done', { output_index: 0, item: { ...item, status: 'completed', content: [{ ...part, text }] } }],
    ['response.completed', { response: response(model, text) }],
  ];
  return events.map(([event, data], i) => ({ event, data: { type: event, sequence_number: i, ...data } }));
}

/** Streams a Responses API answer; it ends with its final event, as OpenAI's do. */
export function streamResponse(req: LlmRequest, res: ServerResponse, deltas: string[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'x-request-id': 'up-req-1' });
  for (const e of responseEvents(req.json.model, deltas)) res.write(`event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`);
  res.end();
}

export function embedding(model: string, inputs: number) {
  return {
    object: 'list',
    data: Array.from({ length: inputs }, (_, index) => ({ object: 'embedding', index, embedding: [0.25, -0.5, 0.125] })),
    model,
    usage: { prompt_tokens: 4 * inputs, total_tokens: 4 * inputs },
  };
}

/** The default: a two-word answer, streamed when asked, on each API. */
export const answer: LlmBehaviour = (req, res) => {
  if (req.path === '/v1/embeddings') {
    res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'up-req-1' });
    return void res.end(JSON.stringify(embedding(req.json.model, Array.isArray(req.json.input) ? req.json.input.length : 1)));
  }
  if (req.path === '/v1/responses') {
    if (req.json.stream) return streamResponse(req, res, ['Hello', ' world']);
    res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'up-req-1' });
    return void res.end(JSON.stringify(response(req.json.model)));
  }
  if (req.json.stream) return streamChunks(req, res, [{ role: 'assistant', content: 'Hello' }, { content: ' world' }]);
  res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'up-req-1', 'openai-processing-ms': '5' });
  res.end(JSON.stringify(completion(req.json.model)));
};

export async function startFakeLlm(behaviour: LlmBehaviour = answer): Promise<FakeLlm> {
  let current = behaviour;
  const requests: LlmRequest[] = [];
  const server = http.createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET' && req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ object: 'list', data: [{ id: 'gpt-4', object: 'model', created: 0, owned_by: 'test' }] }));
    }
    if (req.method !== 'POST' || !['/v1/chat/completions', '/v1/responses', '/v1/embeddings'].includes(req.url ?? '')) return res.writeHead(404).end();
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const request: LlmRequest = { path: req.url!, raw, json: JSON.parse(raw.toString()), headers: req.headers, closed: new Promise((r) => res.on('close', () => r())) };
    requests.push(request);
    try {
      await current(request, res);
    } catch {
      res.destroy();
    }
  });
  server.keepAliveTimeout = 30_000;
  let connections = 0;
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    get connections() {
      return connections;
    },
    behave: (b) => (current = b),
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
