// The LLM proxy through the gateway, driven by the official openai SDK against a fake upstream.
import { credentials, makeGenericClientConstructor, type ClientReadableStream, type Metadata } from '@grpc/grpc-js';
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LlmProxyServiceService, type StreamChatCompletionRequest, type StreamChatCompletionResponse } from '../../gen/abc/orchestrator/v1/llm.js';
import { readEvents } from '../../src/store/event-log.js';
import { answer, chunk, completion, startFakeLlm, streamChunks, type FakeLlm } from '../support/fake-llm.js';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';
import { withKey } from '../support/grpc.js';

let s: TestStack;
let upstream: FakeLlm;
let client: OpenAI;

beforeAll(async () => {
  upstream = await startFakeLlm();
  s = await startTestStack({ llm: { routerUrl: upstream.url, timeoutMs: 500, fallbacks: { 'gpt-4': ['gpt-4o-mini'] } } });
  client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: s.key, maxRetries: 0 });
});
afterAll(async () => {
  await agent?.close();
  await s.close();
  await upstream.close();
});
beforeEach(() => {
  upstream.behave(answer);
});

const messages = [{ role: 'user' as const, content: 'Hello' }];

describe('wire compatibility', () => {
  it('answers a non-streaming call byte for byte as the upstream sent it', async () => {
    const res = await s.http('/v1/chat/completions', { method: 'POST', json: { model: 'gpt-4', messages } });
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(Buffer.from(JSON.stringify(completion('gpt-4'))));
    expect(res.headers.get('x-request-id')).toBe('up-req-1');
    expect(res.headers.get('x-abc-request-id')).toMatch(/^llm_/);
    const parsed = await client.chat.completions.create({ model: 'gpt-4', messages });
    expect(parsed.choices[0]!.message.content).toBe('Hello world');
    expect(parsed.usage).toEqual({ prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 });
  });

  it('passes every request field through untouched, bytes included', async () => {
    const body = '{"model":"gpt-4","messages":[{"role":"user","content":"caf\\u00e9 1.50"}],"temperature":0.70,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"tool_choice":"auto","response_format":{"type":"json_object"},"seed":42,"x_vendor_field":{"keep":true}}';
    const res = await s.http('/v1/chat/completions', { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(200);
    expect(upstream.requests.at(-1)!.raw.toString()).toBe(body);
  });

  it('streams chunks as they arrive and ends with [DONE]', async () => {
    const stream = await client.chat.completions.create({ model: 'gpt-4', messages, stream: true });
    const parts: string[] = [];
    for await (const c of stream) parts.push(c.choices[0]?.delta.content ?? '');
    expect(parts.join('')).toBe('Hello world');
    const raw = await (await s.http('/v1/chat/completions', { method: 'POST', json: { model: 'gpt-4', messages, stream: true } })).text();
    expect(raw.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(raw.split('\n\n').filter(Boolean)).toHaveLength(3);
  });

  it('keeps the upstream connection for the next call when [DONE] comes before the end of the body', async () => {
    upstream.behave(async (req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify(chunk(req.json.model, { content: 'hi' }, 'stop'))}\n\ndata: [DONE]\n\n`);
      await new Promise((r) => setTimeout(r, 20));
      res.end();
    });
    const stream = async () => {
      for await (const c of await client.chat.completions.create({ model: 'gpt-4', messages, stream: true })) void c;
    };
    const settled = () => new Promise((r) => setTimeout(r, 60)); // the body's end has come
    await stream();
    await settled();
    const before = upstream.connections;
    for (let i = 0; i < 3; i++) {
      await stream();
      await settled();
    }
    expect(upstream.connections).toBe(before);
  });

  it('passes tool-call argument deltas through chunk for chunk', async () => {
    const deltas = [
      { role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{"ci' } }] },
      { tool_calls: [{ index: 0, function: { arguments: 'ty":"Par' } }] },
      { tool_calls: [{ index: 0, function: { arguments: 'is"}' } }] },
    ];
    upstream.behave((req, res) => streamChunks(req, res, deltas));
    const stream = await client.chat.completions.create({ model: 'gpt-4', messages, stream: true, tools: [{ type: 'function', function: { name: 'get_weather', parameters: {} } }] });
    const received = [];
    for await (const c of stream) received.push(c);
    expect(received).toEqual(deltas.map((d, i) => chunk('gpt-4', d, i === deltas.length - 1 ? 'stop' : null)));
    const args = received.map((c) => c.choices[0]!.delta.tool_calls?.[0]?.function?.arguments ?? '').join('');
    expect(JSON.parse(args)).toEqual({ city: 'Paris' });
  });

  it('over gRPC, gives a batched caller the chunks that arrived together in one message, and others one message per chunk', async () => {
    // Three chunks (and the usage chunk ABC asks for) in one write, then one more a moment later.
    upstream.behave(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const line = (d: unknown) => `data: ${JSON.stringify(d)}\n\n`;
      res.write(['a', 'b', 'c'].map((t) => line(chunk('gpt-4', { content: t }))).join('') + line({ ...chunk('gpt-4', {}), choices: [], usage: { prompt_tokens: 1, completion_tokens: 4, total_tokens: 5 } }));
      await new Promise((r) => setTimeout(r, 50));
      res.end(line(chunk('gpt-4', { content: 'd' }, 'stop')) + 'data: [DONE]\n\n');
    });
    const llm = new (makeGenericClientConstructor(LlmProxyServiceService, 'LlmProxyService'))(s.core.address, credentials.createInsecure()) as unknown as {
      streamChatCompletion(req: StreamChatCompletionRequest, metadata: Metadata): ClientReadableStream<StreamChatCompletionResponse>;
    };
    const read = async (batched: boolean) => {
      const out: StreamChatCompletionResponse[] = [];
      for await (const m of llm.streamChatCompletion({ body: Buffer.from(JSON.stringify({ model: 'gpt-4', messages, stream: true })), runId: '', batched }, withKey(s.key))) out.push(m as StreamChatCompletionResponse);
      return out;
    };
    const contentOf = (data: Uint8Array) => (JSON.parse(Buffer.from(data).toString()) as ReturnType<typeof chunk>).choices[0]!.delta.content;
    const batched = await read(true);
    expect(batched.map((m) => [m.done, m.events.map((e) => contentOf(e.data))])).toEqual([[false, ['a', 'b', 'c']], [false, ['d']], [true, []]]);
    expect(batched.every((m) => m.data.length === 0)).toBe(true);
    const single = await read(false);
    expect(single.map((m) => (m.done ? 'done' : contentOf(m.data)))).toEqual(['a', 'b', 'c', 'd', 'done']);
    expect(single.every((m) => m.events.length === 0)).toBe(true);
  });

  it('proxies GET /v1/models', async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['gpt-4']);
  });
});

describe('accounting', () => {
  it('asks a stream for usage, strips the extra chunk, and records the tokens', async () => {
    const { runId, token } = await aRun();
    const linked = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: token, maxRetries: 0, defaultHeaders: { 'x-run-id': runId } });
    const stream = await linked.chat.completions.create({ model: 'gpt-4', messages, stream: true });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks.every((c) => c.choices.length > 0 && !c.usage)).toBe(true);
    expect(upstream.requests.at(-1)!.json.stream_options).toEqual({ include_usage: true });
    const done = await waitForEvent(runId, 'llm_call_done');
    expect(done.payload).toMatchObject({ model: 'gpt-4', stream: true, prompt_tokens: 7, completion_tokens: 2, total_tokens: 9, error: null, attempts: 1 });
    expect(done.payload.latency_ms).toEqual(expect.any(Number));
    expect(done.payload.ttft_ms).toEqual(expect.any(Number));

    const withUsage = await linked.chat.completions.create({ model: 'gpt-4', messages, stream: true, stream_options: { include_usage: true } });
    const all = [];
    for await (const c of withUsage) all.push(c);
    expect(all.at(-1)!.usage).toEqual({ prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 });
  });

  it('writes llm_call_started and llm_call_done on the calling run, from an agent using its run token', async () => {
    const { runId, token } = await aRun();
    const linked = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: token, maxRetries: 0, defaultHeaders: { 'x-run-id': runId } });
    await linked.chat.completions.create({ model: 'gpt-4', messages });
    const done = await waitForEvent(runId, 'llm_call_done');
    const events = await readEvents(s.orm.em.fork(), { runId, types: ['llm_call_started', 'llm_call_done'] }, '0', 100);
    const started = events.filter((e) => e.type === 'llm_call_started').at(-1)!;
    expect(started.payload).toMatchObject({ model: 'gpt-4', stream: false, request_id: done.payload.request_id });
    expect(done.payload).toMatchObject({ prompt_tokens: 11, completion_tokens: 2, error: null });
    expect(started.seq).toBeLessThan(done.seq);

    const wrongRun = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: token, maxRetries: 0, defaultHeaders: { 'x-run-id': 'run_someone_else' } });
    await expect(wrongRun.chat.completions.create({ model: 'gpt-4', messages })).rejects.toMatchObject({ status: 403, type: 'permission_error' });
  });
});

describe('resilience', () => {
  it('retries a 500 and a 429 before the first byte, then succeeds', async () => {
    let calls = 0;
    upstream.behave((req, res) => {
      calls++;
      if (calls === 1) return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"boom","type":"server_error"}}');
      if (calls === 2) return void res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '0' }).end('{"error":{"message":"slow down","type":"rate_limit"}}');
      return answer(req, res);
    });
    const res = await client.chat.completions.create({ model: 'gpt-4', messages });
    expect(res.choices[0]!.message.content).toBe('Hello world');
    expect(calls).toBe(3);
  });

  it('falls back to the next model when retries run out', async () => {
    upstream.behave((req, res) => (req.json.model === 'gpt-4' ? void res.writeHead(503).end('{"error":{"message":"down"}}') : answer(req, res)));
    const before = upstream.requests.length;
    const res = await client.chat.completions.create({ model: 'gpt-4', messages });
    expect(res.model).toBe('gpt-4o-mini');
    const models = upstream.requests.slice(before).map((r) => r.json.model);
    expect(models).toEqual(['gpt-4', 'gpt-4', 'gpt-4', 'gpt-4o-mini']);
  });

  it('relays an upstream client error byte for byte, without retrying', async () => {
    const body = '{"error":{"message":"context too long","type":"invalid_request_error","code":"context_length_exceeded","param":null}}';
    upstream.behave((_req, res) => void res.writeHead(400, { 'content-type': 'application/json' }).end(body));
    const before = upstream.requests.length;
    const res = await s.http('/v1/chat/completions', { method: 'POST', json: { model: 'gpt-4', messages } });
    expect(res.status).toBe(400);
    expect(await res.text()).toBe(body);
    expect(upstream.requests.length - before).toBe(1);
  });

  it('times out a stalled upstream with a 504 in the OpenAI error shape', async () => {
    upstream.behave(() => new Promise(() => {}));
    const res = await s.http('/v1/chat/completions', { method: 'POST', json: { model: 'gpt-3.5', messages } });
    expect(res.status).toBe(504);
    expect((await res.json()).error).toMatchObject({ type: 'upstream_error', code: 'llm_error', message: expect.stringContaining('did not answer') });
  });

  it('ends a stream cut in the middle with a well-formed error the SDK raises', async () => {
    upstream.behave((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify(chunk(req.json.model, { content: 'Hel' }))}\n\n`);
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const stream = await client.chat.completions.create({ model: 'gpt-4', messages, stream: true });
    const parts: string[] = [];
    await expect(
      (async () => {
        for await (const c of stream) parts.push(c.choices[0]?.delta.content ?? '');
      })(),
    ).rejects.toBeInstanceOf(APIError);
    expect(parts).toEqual(['Hel']);
  });

  it('ends a stream whose body ends without [DONE] with a well-formed error', async () => {
    upstream.behave((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`data: ${JSON.stringify(chunk(req.json.model, { content: 'Hel' }))}\n\n`);
    });
    const stream = await client.chat.completions.create({ model: 'gpt-4', messages, stream: true });
    const parts: string[] = [];
    const read = (async () => {
      for await (const c of stream) parts.push(c.choices[0]?.delta.content ?? '');
    })();
    await expect(read).rejects.toMatchObject({ message: expect.stringContaining('without [DONE]') });
    expect(parts).toEqual(['Hel']);
  });

  it('relays nothing after [DONE], even from the same read, and an empty stream is not an error', async () => {
    upstream.behave((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const line = (content: string) => `data: ${JSON.stringify(chunk(req.json.model, { content }))}\n\n`;
      res.end(req.json.messages[0].content === 'empty' ? 'data: [DONE]\n\n' : `${line('a')}data: [DONE]\n\n${line('b')}`);
    });
    const read = async (content: string) => {
      const parts: string[] = [];
      for await (const c of await client.chat.completions.create({ model: 'gpt-4', messages: [{ role: 'user', content }], stream: true })) parts.push(c.choices[0]?.delta.content ?? '');
      return parts;
    };
    expect(await read('hello')).toEqual(['a']);
    expect(await read('empty')).toEqual([]);
  });

  it('propagates a client abort to the upstream', async () => {
    upstream.behave(async (req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify(chunk(req.json.model, { content: 'tick' }))}\n\n`);
      await req.closed;
    });
    const controller = new AbortController();
    const stream = await client.chat.completions.create({ model: 'gpt-4', messages, stream: true }, { signal: controller.signal });
    for await (const _ of stream) {
      controller.abort();
      break;
    }
    await upstream.requests.at(-1)!.closed;
  });
});

describe('errors', () => {
  it('answers a bad body with 400 naming the field, in the OpenAI shape', async () => {
    const res = await s.http('/v1/chat/completions', { method: 'POST', json: { model: 'gpt-4' } });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: { message: 'messages must be a non-empty array', type: 'invalid_request_error', code: 'invalid_request', param: 'messages' } });
  });

  it('answers 401 without a key', async () => {
    const anonymous = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'nope', maxRetries: 0 });
    await expect(anonymous.chat.completions.create({ model: 'gpt-4', messages })).rejects.toMatchObject({ status: 401, type: 'authentication_error' });
  });
});

let agent: FakeAgent | undefined;

/** A run whose agent is holding, so its token is live; returns the run id and token. */
async function aRun(): Promise<{ runId: string; token: string }> {
  agent ??= await startFakeAgent();
  agent.behave(async (inv, res) => {
    sse(res, 'delta', { text: 'thinking' });
    await inv.closed;
  });
  await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'llm-user', name: 'LLM user', endpoint: agent.url } });
  const ws = await new WsClient(s.url).open();
  ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
  ws.send({ type: 'agent_invoke', session_id: `sess_llm_${Date.now()}`, agent_id: 'llm-user', message: { role: 'user', content: 'think' } });
  const delta = await ws.next('delta');
  ws.close();
  return { runId: delta.run_id, token: String(agent.invocations.at(-1)!.headers['x-abc-run-token']) };
}

async function waitForEvent(runId: string, type: string) {
  let found;
  await expect
    .poll(async () => (found = (await readEvents(s.orm.em.fork(), { runId, types: [type] }, '0', 100)).at(-1)), { timeout: 5000, interval: 20 })
    .toBeDefined();
  return found!;
}
