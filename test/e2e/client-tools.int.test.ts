// Client tools (seed 001 §4.4): sent to the session's client, completed by its tool_result.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readEvents } from '../../src/store/event-log.js';
import { sse, startFakeAgent, type Behaviour, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';

let s: TestStack;
let agent: FakeAgent;

/** The agent's usual turn: a delta, then it waits for its client tools. */
const waitForTools: Behaviour = async (inv, res) => {
  sse(res, 'delta', { text: 'need a screenshot' });
  await inv.closed;
};

beforeAll(async () => {
  s = await startTestStack({ timerSweepMs: 50 });
  agent = await startFakeAgent(waitForTools);
  await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'viewer', name: 'Viewer', endpoint: agent.url } });
  const tool = await s.http('/v1/tools/register', {
    method: 'POST',
    json: {
      name: 'browser.screenshot',
      kind: 'client',
      timeout_ms: 5000,
      input_schema: { type: 'object', required: ['url'], properties: { url: { type: 'string' } } },
      output_schema: { type: 'object', required: ['file_path'], properties: { file_path: { type: 'string' } } },
    },
  });
  expect(tool.status).toBe(200);
});
afterAll(async () => {
  await agent.close();
  await s.close();
});

async function run(): Promise<{ ws: WsClient; runId: string; token: string }> {
  const ws = await new WsClient(s.url).open();
  ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
  ws.send({ type: 'agent_invoke', session_id: `sess_client_${Date.now()}_${Math.random().toString(36).slice(2, 6)}`, agent_id: 'viewer', message: { role: 'user', content: 'look' } });
  const delta = await ws.next('delta');
  return { ws, runId: delta.run_id, token: String(agent.invocations.at(-1)!.headers['x-abc-run-token']) };
}

const invoke = (token: string, body: Record<string, unknown>) => s.http('/v1/tools/browser.screenshot:invoke', { method: 'POST', key: token, json: body }).then((r) => r.json());

describe('client tools', () => {
  it('sends tool_request to the connected client, and its tool_result completes the call', async () => {
    const { ws, runId, token } = await run();
    const pending = await invoke(token, { run_id: runId, args: { url: 'https://example.com' } });
    expect(pending).toMatchObject({ status: 'pending', reason: 'waiting_client' });
    const request = await ws.next('tool_request');
    expect(request).toMatchObject({ run_id: runId, tool_call_id: pending.tool_call_id, tool_name: 'browser.screenshot', args: { url: 'https://example.com' } });
    expect(request.deadline_ts).toBeGreaterThan(Date.now());
    expect((await (await s.http(`/v1/runs/${runId}`)).json()).run.status).toBe('PAUSED_WAITING_TOOL');

    const waiting = s.http(`/v1/tool_calls/${pending.tool_call_id}:wait?timeout_ms=5000`, { method: 'POST', key: token }).then((r) => r.json());
    ws.send({ type: 'tool_result', run_id: runId, tool_call_id: pending.tool_call_id, ok: true, result: { file_path: '/tmp/screenshot.png' } });
    expect(await waiting).toMatchObject({ status: 'succeeded', result: { file_path: '/tmp/screenshot.png' } });
    expect((await (await s.http(`/v1/runs/${runId}`)).json()).run.status).toBe('RUNNING');

    // A second result for the finished call gets a clear error, as does an unknown call.
    ws.send({ type: 'tool_result', tool_call_id: pending.tool_call_id, ok: true, result: { file_path: 'again' } });
    expect(await ws.next('error')).toMatchObject({ code: 'tool_call_finished' });
    ws.send({ type: 'tool_result', tool_call_id: 'tc_nope', ok: true, result: {} });
    await ws.until((f) => f.filter((x) => x.type === 'error').length === 2);
    expect(ws.of('error')[1]).toMatchObject({ code: 'not_found' });
    ws.close();
  });

  it("invokes the agent only once its client is online: a client tool the agent calls at once reaches the client", async () => {
    // The connection's presence write waits on a lock; an agent that runs meanwhile would find its client offline.
    const lock = new pg.Client({ connectionString: s.orm.config.get('clientUrl')! });
    await lock.connect();
    await lock.query('BEGIN');
    await lock.query('LOCK TABLE client_connections IN EXCLUSIVE MODE');
    let toolCalled!: () => void;
    const called = new Promise<void>((resolve) => (toolCalled = resolve));
    agent.behave(async (inv, res) => {
      const answer = await invoke(String(inv.headers['x-abc-run-token']), { run_id: inv.body.run_id, args: { url: 'https://eager.example' } });
      toolCalled();
      sse(res, 'delta', { text: JSON.stringify(answer) });
      await inv.closed;
    });
    const ws = await new WsClient(s.url).open();
    try {
      ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
      ws.send({ type: 'agent_invoke', session_id: `sess_eager_${Date.now()}`, agent_id: 'viewer', message: { role: 'user', content: 'look now' } });
      // The lock goes once the agent has called its tool, or once the presence write has waited half a second without it.
      const joinWaits = () =>
        s.orm.em.fork().execute<{ n: number }[]>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO client_connections%'").then(([row]) => row!.n);
      await Promise.race([called, expect.poll(joinWaits, { timeout: 10_000 }).toBe(1).then(() => new Promise((r) => setTimeout(r, 500)))]);
      await lock.query('COMMIT');
      const answer = JSON.parse((await ws.next('delta')).text);
      expect(answer).toMatchObject({ status: 'pending', reason: 'waiting_client' });
      expect(await ws.next('tool_request')).toMatchObject({ tool_call_id: answer.tool_call_id, args: { url: 'https://eager.example' } });
    } finally {
      ws.close();
      await lock.end();
      agent.behave(waitForTools);
    }
  });

  it('resumes a run whose two client calls end at the same time', async () => {
    const { ws, runId, token } = await run();
    const calls = [await invoke(token, { run_id: runId, args: { url: 'https://a.example' } }), await invoke(token, { run_id: runId, args: { url: 'https://b.example' } })];
    await ws.until((f) => f.filter((x) => x.type === 'tool_request').length === 2);
    // The run's row is held until both results wait for it: neither has committed when the other counts the calls still held.
    const [holder, watcher] = [new pg.Client({ connectionString: s.orm.config.get('clientUrl')! }), new pg.Client({ connectionString: s.orm.config.get('clientUrl')! })];
    await Promise.all([holder.connect(), watcher.connect()]);
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM runs WHERE run_id = $1 FOR UPDATE', [runId]);
    // Each from a client of its own: a connection handles its frames in turn.
    const other = await new WsClient(s.url).open();
    other.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
    await other.next('hello_ack');
    for (const [client, call] of [[ws, calls[0]], [other, calls[1]]] as const) {
      client.send({ type: 'tool_result', run_id: runId, tool_call_id: call.tool_call_id, ok: true, result: { file_path: `/tmp/${call.tool_call_id}.png` } });
    }
    const waiting = async () => (await watcher.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows[0].n;
    await expect.poll(waiting, { timeout: 10_000 }).toBe(2);
    await holder.query('COMMIT');
    await Promise.all([holder.end(), watcher.end()]);
    // The second counts the calls after the first's commit: it sees none held, and resumes the run once.
    await expect.poll(async () => (await (await s.http(`/v1/runs/${runId}`)).json()).run.status).toBe('RUNNING');
    const states = (await readEvents(s.orm.em.fork(), { runId, types: ['run_state'] }, '0', 10)).map((e) => e.payload.to);
    expect(states).toEqual(['PAUSED_WAITING_TOOL', 'RUNNING']);
    ws.close();
    other.close();
  });

  it('fails at once with client_offline when no client of the session is connected', async () => {
    const { ws, runId, token } = await run();
    ws.close();
    await ws.until(() => ws.closed);
    await new Promise((r) => setTimeout(r, 100)); // the connection's presence is removed on close
    const res = await invoke(token, { run_id: runId, args: { url: 'https://example.com' } });
    expect(res).toMatchObject({ status: 'failed', error: { code: 'client_offline', retryable: true } });
    expect((await (await s.http(`/v1/runs/${runId}`)).json()).run.status).toBe('RUNNING');
    // The client learns of it as an IM error frame (seed 001 §5.3) when it comes back.
    const back = await new WsClient(s.url).open();
    back.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
    back.send({ type: 'resume', session_id: (await (await s.http(`/v1/runs/${runId}`)).json()).run.session_id, cursor: '0' });
    expect(await back.next('error')).toMatchObject({ code: 'client_offline', retryable: true, run_id: runId });
    back.close();
  });

  it('times out a call whose client misses the deadline, and tells the client', async () => {
    const { ws, runId, token } = await run();
    const pending = await invoke(token, { run_id: runId, args: { url: 'https://slow.example' }, timeout_ms: 300 });
    await ws.next('tool_request');
    expect(await ws.next('error')).toMatchObject({ code: 'tool_timeout', run_id: runId });
    const call = await (await s.http(`/v1/tool_calls/${pending.tool_call_id}`)).json();
    expect(call).toMatchObject({ status: 'timeout', error: { code: 'tool_timeout' } });
    const states = (await readEvents(s.orm.em.fork(), { runId, types: ['run_state'] }, '0', 10)).map((e) => e.payload.to);
    expect(states).toEqual(['PAUSED_WAITING_TOOL', 'RUNNING']);
    ws.close();
  });

  it('refuses a result that breaks the output schema', async () => {
    const { ws, runId, token } = await run();
    const pending = await invoke(token, { run_id: runId, args: { url: 'https://example.com' } });
    await ws.next('tool_request');
    ws.send({ type: 'tool_result', tool_call_id: pending.tool_call_id, ok: true, result: { path: 'wrong-field' } });
    const done = await (await s.http(`/v1/tool_calls/${pending.tool_call_id}:wait?timeout_ms=3000`, { method: 'POST', key: token })).json();
    expect(done).toMatchObject({ status: 'failed', error: { code: 'invalid_output' } });
    ws.close();
  });
});
