// The IM protocol over a real WebSocket through the gateway (seed 001 §5).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echo, sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';

let s: TestStack;
let agent: FakeAgent;

beforeAll(async () => {
  s = await startTestStack();
  agent = await startFakeAgent();
  const res = await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'echo', name: 'Echo', endpoint: agent.url } });
  expect(res.status).toBe(200);
});
afterAll(async () => {
  await agent.close();
  await s.close();
});

async function hello(userId = 'u1'): Promise<WsClient> {
  const ws = await new WsClient(s.url).open();
  ws.send({ type: 'hello', user_id: userId, api_key: s.key, client_meta: { app: 'web', version: '1.0.0' } });
  await ws.next('hello_ack');
  return ws;
}

describe('IM over WebSocket', () => {
  it('runs agent_invoke -> run_started -> delta -> done with the seed frame shapes', async () => {
    agent.behave(echo);
    const ws = await hello();
    ws.send({ type: 'agent_invoke', request_id: 'req_abc123', session_id: 'sess_ws_1', agent_id: 'echo', message: { role: 'user', content: 'hi there' } });
    const done = await ws.next('done');
    const started = ws.of('run_started')[0]!;
    expect(started).toMatchObject({ type: 'run_started', request_id: 'req_abc123', session_id: 'sess_ws_1', agent_id: 'echo', run_id: expect.stringMatching(/^run_/) });
    expect(typeof started.ts).toBe('number');
    expect(ws.of('delta').map((d) => d.text).join('')).toBe('echo: hi there');
    expect(ws.of('delta').every((d) => d.run_id === started.run_id && /^\d+$/.test(d.cursor))).toBe(true);
    expect(done).toMatchObject({ run_id: started.run_id, final_message: 'echo: hi there', usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 } });
    expect(done.usage.duration_ms).toEqual(expect.any(Number));
    ws.close();
  });

  it('answers a malformed frame with invalid_request naming the field and keeps the socket open', async () => {
    const ws = await hello();
    ws.send({ type: 'agent_invoke', request_id: 'r1', session_id: 'sess_ws_bad', message: { role: 'user', content: 'x' } });
    expect(await ws.next('error')).toMatchObject({ code: 'invalid_request', field: 'agent_id', request_id: 'r1' });
    ws.ws.send('{not json');
    await ws.until((f) => f.filter((x) => x.type === 'error').length === 2);
    ws.send({ type: 'teleport' });
    await ws.until((f) => f.filter((x) => x.type === 'error').length === 3);
    expect(ws.of('error').map((e) => e.field)).toEqual(['agent_id', '', 'type']);
    agent.behave(echo);
    ws.send({ type: 'agent_invoke', session_id: 'sess_ws_bad', agent_id: 'echo', message: { role: 'user', content: 'still works' } });
    expect((await ws.next('done')).final_message).toBe('echo: still works');
    ws.close();
  });

  it('closes the socket after an error frame for a bad API key', async () => {
    const ws = await new WsClient(s.url).open();
    ws.send({ type: 'hello', user_id: 'u1', api_key: 'sk-xxx-not-a-valid-key' });
    expect(await ws.next('error')).toMatchObject({ code: 'unauthenticated' });
    await ws.until(() => ws.closed);
  });

  it('cancels a run with cancel_run', async () => {
    agent.behave(async (inv, res) => {
      sse(res, 'delta', { text: 'working' });
      await inv.closed;
    });
    const ws = await hello();
    ws.send({ type: 'agent_invoke', session_id: 'sess_ws_cancel', agent_id: 'echo', message: { role: 'user', content: 'long job' } });
    const delta = await ws.next('delta');
    ws.send({ type: 'cancel_run', run_id: delta.run_id });
    expect(await ws.next('state')).toMatchObject({ state: 'CANCELLED', run_id: delta.run_id });
    const run = await (await s.http(`/v1/runs/${delta.run_id}`)).json();
    expect(run.run).toMatchObject({ status: 'CANCELLED', error: { code: 'cancelled' } });
    ws.close();
  });

  it('resumes after a reconnect from the last cursor with nothing lost or repeated', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    agent.behave(async (_inv, res) => {
      for (let i = 0; i < 300; i++) {
        if (i === 50) await gate;
        sse(res, 'delta', { text: `${i},` });
      }
      sse(res, 'done', { usage: {} });
      res.end();
    });
    const first = await hello();
    first.send({ type: 'agent_invoke', session_id: 'sess_ws_resume', agent_id: 'echo', message: { role: 'user', content: 'count' } });
    await first.until(() => first.text().split(',').length > 50);
    first.ws.terminate();
    release();
    const seen = first.of('delta');
    const second = await hello();
    second.send({ type: 'resume', session_id: 'sess_ws_resume', cursor: seen.at(-1)!.cursor });
    await second.next('done');
    expect(first.text() + second.text()).toBe(Array.from({ length: 300 }, (_, i) => `${i},`).join(''));
    second.close();
  });
});
