// The Responses API and embeddings on the LLM proxy, driven by the official
// openai SDK (`client.responses.create`, `.stream`, `client.embeddings.create`)
// against a fake upstream that speaks both: byte-exact relay, named stream
// events, usage recorded on the run, retries and fallbacks before the first byte.
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { readEvents } from '../../src/store/event-log.js';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { answer, embedding, response, responseEvents, startFakeLlm, type FakeLlm } from '../support/fake-llm.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';

let s: TestStack;
let upstream: FakeLlm;
let agent: FakeAgent;
let client: OpenAI;

beforeAll(async () => {
  upstream = await startFakeLlm();
  s = await startTestStack({ llm: { routerUrl: upstream.url, timeoutMs: 1000, fallbacks: { 'gpt-4.1': ['gpt-4.1-mini'] } } });
  client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: s.key, maxRetries: 0 });
  agent = await startFakeAgent();
  expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'resp-user', name: 'R', endpoint: agent.url } })).status).toBe(200);
});
afterAll(async () => {
  await agent?.close();
  await s?.close();
  await upstream?.close();
});
beforeEach(() => {
  upstream.behave(answer);
});

/** A run whose agent holds, and an openai client acting for it with its token. */
async function asRun(): Promise<{ runId: string; linked: OpenAI }> {
  agent.behave(async (inv, res) => {
    sse(res, 'delta', { text: 'thinking' });
    await inv.closed;
  });
  const ws = await new WsClient(s.url).open();
  ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
  ws.send({ type: 'agent_invoke', session_id: `sess_resp_${Date.now()}_${Math.random()}`, agent_id: 'resp-user', message: { role: 'user', content: 'go' } });
  const delta = await ws.next('delta');
  ws.close();
  const token = String(agent.invocations.at(-1)!.headers['x-abc-run-token']);
  return { runId: delta.run_id, linked: new OpenAI({ baseURL: `${s.url}/v1`, apiKey: token, maxRetries: 0 }) };
}

async function lastCall(runId: string) {
  let done;
  await expect.poll(async () => (done = (await readEvents(s.orm.em.fork(), { runId, types: ['llm_call_done'] }, '0', 50)).at(-1)), { timeout: 5000, interval: 20 }).toBeDefined();
  return done!.payload;
}

describe('the Responses API', () => {
  it('answers a call byte for byte, passing previous_response_id and every field through', async () => {
    const body = '{"model":"gpt-4.1","input":"caf\\u00e9?","previous_response_id":"resp_earlier","instructions":"Be brief.","tools":[{"type":"function","name":"f","parameters":{}}],"store":true}';
    const res = await s.http('/v1/responses', { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(JSON.stringify(response('gpt-4.1')));
    expect(upstream.requests.at(-1)!.raw.toString()).toBe(body);
    expect(upstream.requests.at(-1)!.path).toBe('/v1/responses');

    const parsed = await client.responses.create({ model: 'gpt-4.1', input: 'Hello', previous_response_id: 'resp_earlier' });
    expect(parsed.output_text).toBe('Hello world');
    expect(upstream.requests.at(-1)!.json.previous_response_id).toBe('resp_earlier');
  });

  it("streams named events as they arrive, for the SDK's stream helper and its raw iterator", async () => {
    const stream = client.responses.stream({ model: 'gpt-4.1', input: 'Hello' });
    const deltas: string[] = [];
    stream.on('response.output_text.delta', (e) => deltas.push(e.delta));
    const final = await stream.finalResponse();
    expect(final.output_text).toBe('Hello world');
    expect(deltas).toEqual(['Hello', ' world']);

    const raw = await client.responses.create({ model: 'gpt-4.1', input: 'Hello', stream: true });
    const types: string[] = [];
    for await (const e of raw) types.push(e.type);
    expect(types).toEqual(responseEvents('gpt-4.1', ['Hello', ' world']).map((e) => e.event));

    // On the wire: each event keeps its name, and the stream ends with its final event, as OpenAI's does.
    const text = await (await s.http('/v1/responses', { method: 'POST', json: { model: 'gpt-4.1', input: 'Hello', stream: true } })).text();
    expect(text.startsWith('event: response.created\ndata: {')).toBe(true);
    expect(text).not.toContain('[DONE]');
    expect(text.trimEnd().split('\n\n').at(-1)).toMatch(/^event: response\.completed\ndata: /);
  });

  it('records each call on the calling run, with the usage of a stream from its final event', async () => {
    const { runId, linked } = await asRun();
    await linked.responses.create({ model: 'gpt-4.1', input: 'Hello' });
    expect(await lastCall(runId)).toMatchObject({ api: 'responses', model: 'gpt-4.1', stream: false, prompt_tokens: 9, completion_tokens: 2, total_tokens: 11, error: null });
    await linked.responses.stream({ model: 'gpt-4.1', input: 'Hello' }).finalResponse();
    await expect.poll(async () => (await readEvents(s.orm.em.fork(), { runId, types: ['llm_call_done'] }, '0', 50)).length).toBe(2);
    const streamed = await lastCall(runId);
    expect(streamed).toMatchObject({ api: 'responses', stream: true, total_tokens: 11, error: null });
    expect(streamed.ttft_ms).toEqual(expect.any(Number));
    expect(upstream.requests.at(-1)!.json.stream_options).toBeUndefined();
    await expect.poll(async () => (await s.orm.em.fork().execute<{ n: number }[]>('SELECT tokens_used AS n FROM runs WHERE run_id = ?', [runId]))[0]!.n).toBe(22);
  });

  it('retries and falls back before the first byte, and ends a stream cut later with an error the SDK raises', async () => {
    upstream.behave((req, res) => (req.json.model === 'gpt-4.1' ? void res.writeHead(503).end('{"error":{"message":"down"}}') : answer(req, res)));
    const before = upstream.requests.length;
    expect((await client.responses.create({ model: 'gpt-4.1', input: 'Hello' })).model).toBe('gpt-4.1-mini');
    expect(upstream.requests.slice(before).map((r) => r.json.model)).toEqual(['gpt-4.1', 'gpt-4.1', 'gpt-4.1', 'gpt-4.1-mini']);

    upstream.behave((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const e of responseEvents(req.json.model, ['Hel', 'lo']).slice(0, 5)) res.write(`event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`);
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const cut = await client.responses.create({ model: 'gpt-4.1', input: 'Hello', stream: true });
    const seen: string[] = [];
    await expect(
      (async () => {
        for await (const e of cut) seen.push(e.type);
      })(),
    ).rejects.toBeInstanceOf(APIError);
    expect(seen.at(-1)).toBe('response.output_text.delta');
  });

  it('answers a bad body with 400 naming the field, in the OpenAI shape', async () => {
    const res = await s.http('/v1/responses', { method: 'POST', json: { model: 'gpt-4.1', input: 42 } });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_request', param: 'input' });
    expect((await s.http('/v1/responses', { method: 'POST', json: { input: 'x' } })).status).toBe(400);
  });
});

describe('embeddings', () => {
  it('are relayed byte for byte and recorded on the run', async () => {
    const { runId, linked } = await asRun();
    const res = await linked.embeddings.create({ model: 'text-embedding-3-small', input: ['one', 'two'], encoding_format: 'float' });
    expect(res.data.map((d) => d.embedding)).toEqual(embedding('text-embedding-3-small', 2).data.map((d) => d.embedding));
    expect(upstream.requests.at(-1)!.path).toBe('/v1/embeddings');
    expect(await lastCall(runId)).toMatchObject({ api: 'embeddings', model: 'text-embedding-3-small', prompt_tokens: 8, total_tokens: 8, error: null });
    const empty = await s.http('/v1/embeddings', { method: 'POST', json: { model: 'text-embedding-3-small', input: [] } });
    expect(empty.status).toBe(400);
    expect((await empty.json()).error).toMatchObject({ param: 'input' });
  });
});
