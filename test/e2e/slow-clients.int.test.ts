// Large streams and clients that stop reading. A run's frames reach a client
// however much the run wrote, and a client that stops reading holds the stream
// where it is: the gateway stops taking frames from the core, which stops
// reading the log (or the LLM upstream), until the client reads again. Nothing
// is lost or repeated.
import { once } from 'node:events';
import http from 'node:http';
import type { Socket } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { chunk, startFakeLlm, type FakeLlm } from '../support/fake-llm.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';

let s: TestStack;
let agent: FakeAgent;
let upstream: FakeLlm;

// 640 deltas of 16 KB (the most one stored delta carries): 10 MB, over grpc-js's 4 MB default message limit.
const DELTAS = 640;
const delta = (i: number) => `${i},`.padEnd(16 * 1024, '.');
const whole = Array.from({ length: DELTAS }, (_, i) => delta(i)).join('');

// The LLM upstream's body timeout: a held stream outlasts it.
const LLM_TIMEOUT_MS = 1000;

beforeAll(async () => {
  upstream = await startFakeLlm();
  s = await startTestStack({ llm: { routerUrl: upstream.url, timeoutMs: LLM_TIMEOUT_MS } });
  agent = await startFakeAgent(async (_inv, res) => {
    for (let i = 0; i < DELTAS; i++) if (!sse(res, 'delta', { text: delta(i) })) await new Promise((r) => res.once('drain', r));
    sse(res, 'done', { usage: {} });
    res.end();
  });
  const res = await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'big', name: 'Big', endpoint: agent.url } });
  expect(res.status).toBe(200);
});
afterAll(async () => {
  await agent.close();
  await s.close();
  await upstream.close();
});

async function hello(): Promise<WsClient> {
  const ws = await new WsClient(s.url).open();
  ws.send({ type: 'hello', user_id: 'u1', api_key: s.key });
  await ws.next('hello_ack');
  return ws;
}

/** A gauge of the gateway's metrics, by its labels. */
async function gauge(name: string, labels: string): Promise<number> {
  const text = await (await s.http('/metrics')).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').at(-1)) : NaN;
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A run of the big agent, read to its end by a client that reads; its id and session. */
async function bigRun(session: string): Promise<string> {
  const ws = await hello();
  ws.send({ type: 'agent_invoke', session_id: session, agent_id: 'big', message: { role: 'user', content: 'go' } });
  await ws.next('done', 0);
  expect(ws.text()).toBe(whole);
  ws.close();
  return ws.of('run_started')[0]!.run_id as string;
}

describe('large streams and slow clients', () => {
  it('sends a run of 10 MB to a client that reads it live, to one that resumes it from the start, and a page of it over HTTP', async () => {
    const runId = await bigRun('sess_big_1');
    const again = await hello();
    again.send({ type: 'resume', session_id: 'sess_big_1', cursor: '0' });
    await again.next('done');
    expect(again.text()).toBe(whole);
    expect(again.of('error')).toEqual([]);
    again.close();

    const page = await s.http(`/v1/runs/${runId}/events?limit=1000&types=agent_stream_delta`);
    expect(page.status).toBe(200);
    const body = await page.json();
    expect(body.events.map((e: { payload: { text: string } }) => e.payload.text).join('')).toBe(whole);
  });

  it('holds an IM stream for a client that stopped reading, and delivers the rest exactly once when it reads again', async () => {
    const ws = await hello();
    const socket = (ws.ws as unknown as { _socket: Socket })._socket;
    ws.send({ type: 'agent_invoke', session_id: 'sess_big_2', agent_id: 'big', message: { role: 'user', content: 'go' } });
    await ws.next('run_started');
    socket.pause();
    const runId = ws.of('run_started')[0]!.run_id as string;
    await until(async () => (await (await s.http(`/v1/runs/${runId}`)).json()).run.status === 'DONE', 'the run to end');
    await until(async () => (await gauge('abc_gateway_paused_streams', 'surface="im"')) === 1, 'the IM stream to pause');
    socket.resume();
    await ws.next('done');
    expect(ws.text()).toBe(whole);
    expect(await gauge('abc_gateway_paused_streams', 'surface="im"')).toBe(0);
    ws.close();
  });

  it('holds an SSE stream for a client that stopped reading, and delivers the rest exactly once when it reads again', async () => {
    const runId = await bigRun('sess_big_3');
    const res = await new Promise<http.IncomingMessage>((resolve, reject) =>
      http.get(`${s.url}/v1/runs/${runId}/events/stream`, { headers: { authorization: `Bearer ${s.key}` } }, resolve).on('error', reject),
    );
    expect(res.statusCode).toBe(200);
    res.pause();
    await until(async () => (await gauge('abc_gateway_paused_streams', 'surface="sse"')) === 1, 'the SSE stream to pause');
    let body = '';
    res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk)).resume();
    await new Promise((r) => res.once('end', r));
    const events = body
      .split('\n\n')
      .filter((block) => block.startsWith('id: '))
      .map((block) => JSON.parse(block.split('\n').find((l) => l.startsWith('data: '))!.slice(6)) as { seq: number; type: string; payload: { text?: string } });
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.type === 'agent_stream_delta').map((e) => e.payload.text).join('')).toBe(whole);
    expect(await gauge('abc_gateway_paused_streams', 'surface="sse"')).toBe(0);
  });

  it('lets a held stream go when its client leaves without reading, on either surface', async () => {
    const runId = await bigRun('sess_big_4');
    const ws = await hello();
    (ws.ws as unknown as { _socket: Socket })._socket.pause();
    ws.send({ type: 'resume', session_id: 'sess_big_4', cursor: '0' });
    const req = http.get(`${s.url}/v1/runs/${runId}/events/stream`, { headers: { authorization: `Bearer ${s.key}` } });
    const res = await new Promise<http.IncomingMessage>((resolve) => req.once('response', resolve));
    res.pause();
    await until(async () => (await gauge('abc_gateway_paused_streams', 'surface="im"')) === 1, 'the IM stream to pause');
    await until(async () => (await gauge('abc_gateway_paused_streams', 'surface="sse"')) === 1, 'the SSE stream to pause');
    ws.ws.terminate();
    req.destroy();
    await until(async () => (await gauge('abc_gateway_paused_streams', 'surface="im"')) === 0, 'the IM hold to end');
    await until(async () => (await gauge('abc_gateway_paused_streams', 'surface="sse"')) === 0, 'the SSE hold to end');
  });
});

describe('LLM proxy streams and slow clients', () => {
  it('holds the upstream of a client that stopped reading, past the upstream timeout, and relays every chunk when it reads again', async () => {
    // 3,000 chunks of 16 KB: 48 MB, more than the sockets and windows between the upstream and the client hold.
    const CHUNKS = 3000;
    const piece = (i: number) => `${i},`.padEnd(16 * 1024, '.');
    const progress = { written: 0, waiting: false, done: false };
    upstream.behave(async (req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (let i = 0; i < CHUNKS; i++) {
        progress.written = i + 1;
        if (res.write(`data: ${JSON.stringify(chunk(req.json.model, { content: piece(i) }))}\n\n`)) continue;
        progress.waiting = true;
        await once(res, 'drain');
        progress.waiting = false;
      }
      res.end('data: [DONE]\n\n');
      progress.done = true;
    });
    // The stock SDK's consumer reads the first chunk, then takes nothing more until it goes on iterating.
    const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: s.key, maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'gpt-4', messages: [{ role: 'user', content: 'go' }], stream: true });
    // A failed check leaves no held stream behind for the stack's shutdown to wait on.
    onTestFinished(() => stream.controller.abort());
    const chunks = stream[Symbol.asyncIterator]();
    const first = await chunks.next();
    await until(async () => (await gauge('abc_gateway_paused_streams', 'surface="llm"')) === 1, 'the LLM stream to pause');
    // The upstream waits for its socket to drain, and stays held for longer than its body timeout. The
    // buffers between it and the client may take more after its first wait: held is when it writes no more.
    await until(async () => {
      const before = progress.written;
      await new Promise((r) => setTimeout(r, 500));
      return progress.waiting && progress.written === before;
    }, 'the upstream to be held');
    const held = progress.written;
    await new Promise((r) => setTimeout(r, LLM_TIMEOUT_MS * 1.5));
    expect(progress.written).toBe(held);
    expect(progress.done).toBe(false);
    expect(held).toBeLessThan(CHUNKS);

    // The rest, in order; the SDK ends at [DONE] and would throw on an error chunk.
    const parts = [first.value!.choices[0]!.delta.content];
    for (let next = await chunks.next(); !next.done; next = await chunks.next()) parts.push(next.value.choices[0]!.delta.content);
    expect(parts.join('')).toBe(Array.from({ length: CHUNKS }, (_, i) => piece(i)).join(''));
    expect(progress.done).toBe(true);
    expect(await gauge('abc_gateway_paused_streams', 'surface="llm"')).toBe(0);
  });
});
