// What a run token, a silent socket and a stored agent credential may and may not do.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';
import { liveRun, type LiveRun } from '../support/live-run.js';

let s: TestStack;
let agent: FakeAgent;
const AGENT_SECRET = 'agent-bearer-secret-0123456789';

beforeAll(async () => {
  s = await startTestStack({ imHelloTimeoutMs: 300 });
  agent = await startFakeAgent();
  for (const id of ['sec-a', 'sec-b']) {
    const res = await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: id, name: id, endpoint: agent.url, auth: { type: 'bearer', token: AGENT_SECRET } } });
    expect(res.status).toBe(200);
  }
});
afterAll(async () => {
  await agent.close();
  await s.close();
});

/** Lets a held run finish and closes its socket. */
const end = (run: LiveRun) => {
  run.release();
  run.ws.close();
};

const put = (json: unknown, key?: string) => s.http('/v1/context', { method: 'POST', json, key });

describe('a run token', () => {
  it('reads only the context of its run, its session and its agent', async () => {
    const mine = await liveRun(s, agent, { agentId: 'sec-a', userId: 'alice' });
    const theirs = await liveRun(s, agent, { agentId: 'sec-b', userId: 'bob' });
    const keyOf = async (json: unknown) => (await (await put(json)).json()).blob.context_key as string;
    const own = [
      await keyOf({ owner_type: 'session', owner_id: mine.sessionId, data: { x: 1 } }),
      await keyOf({ owner_type: 'run', owner_id: mine.runId, data: { x: 2 } }),
      await keyOf({ owner_type: 'agent', owner_id: 'sec-a', data: { x: 3 } }),
    ];
    const foreign = [
      await keyOf({ owner_type: 'session', owner_id: theirs.sessionId, data: { secret: 'bob' } }),
      await keyOf({ owner_type: 'run', owner_id: theirs.runId, data: { secret: 'bob' } }),
      await keyOf({ owner_type: 'agent', owner_id: 'sec-b', data: { secret: 'b' } }),
    ];
    for (const key of own) expect((await s.http(`/v1/context/${key}`, { key: mine.token })).status).toBe(200);
    for (const key of foreign) {
      const res = await s.http(`/v1/context/${key}`, { key: mine.token });
      expect(res.status).toBe(404);
      expect((await res.json()).error.code).toBe('not_found');
      // Nor can it overwrite one by its key, or write another agent's context.
      expect((await put({ context_key: key, owner_type: 'session', owner_id: mine.sessionId, data: {} }, mine.token)).status).toBe(404);
    }
    expect((await put({ owner_type: 'agent', owner_id: 'sec-b', data: {} }, mine.token)).status).toBe(403);
    for (const r of [mine, theirs]) end(r);
  });

  it('reads its own run but not another run', async () => {
    const mine = await liveRun(s, agent, { agentId: 'sec-a' });
    const theirs = await liveRun(s, agent, { agentId: 'sec-b' });
    expect((await s.http(`/v1/runs/${mine.runId}`, { key: mine.token })).status).toBe(200);
    const other = await s.http(`/v1/runs/${theirs.runId}`, { key: mine.token });
    expect(other.status).toBe(404);
    for (const r of [mine, theirs]) end(r);
  });

  it('cannot mark an agent healthy', async () => {
    const run = await liveRun(s, agent, { agentId: 'sec-a' });
    const res = await s.http('/v1/agents/sec-b/heartbeat', { method: 'POST', key: run.token, json: {} });
    expect(res.status).toBe(403);
    expect((await s.http('/v1/agents/sec-b/heartbeat', { method: 'POST', json: {} })).status).toBe(200);
    end(run);
  });

  it('dies with its run, except for reading the transcript it wrote', async () => {
    const run = await liveRun(s, agent, { agentId: 'sec-a' });
    expect((await s.http('/v1/tools/echo:invoke', { method: 'POST', key: run.token, json: { run_id: run.runId, args: { a: 1 } } })).status).toBe(200);
    run.release();
    await run.ws.next('done');
    const tool = await s.http('/v1/tools/echo:invoke', { method: 'POST', key: run.token, json: { run_id: run.runId, args: { a: 1 } } });
    expect(tool.status).toBe(401);
    expect((await tool.json()).error.message).toMatch(/run has ended/);
    const llm = await s.http('/v1/chat/completions', { method: 'POST', key: run.token, json: { model: 'm', messages: [{ role: 'user', content: 'hi' }] } });
    expect(llm.status).toBe(401);
    const transcript = await s.http(`/v1/sessions/${run.sessionId}/messages`, { key: run.token });
    expect(transcript.status).toBe(200);
    expect((await transcript.json()).messages.length).toBeGreaterThan(0);
    run.ws.close();
  });
});

describe('an IM socket', () => {
  it('is closed when it says no hello within the hello timeout', async () => {
    const ws = await new WsClient(s.url).open();
    await ws.until(() => ws.closed, 5000).catch(() => {});
    expect(ws.closed).toBe(true);
    expect(ws.of('error')[0]).toMatchObject({ code: 'hello_timeout' });
  });

  it('keeps its user through a second hello', async () => {
    const ws = await new WsClient(s.url).open();
    ws.send({ type: 'hello', api_key: s.key, user_id: 'alice' });
    await ws.next('hello_ack');
    ws.send({ type: 'hello', api_key: s.key, user_id: 'mallory' });
    const error = await ws.next('error');
    expect(error).toMatchObject({ code: 'already_authenticated' });
    expect(ws.of('hello_ack')).toHaveLength(1);
    // Still alice, past the hello timeout: mallory's session is not hers to resume.
    await new Promise((r) => setTimeout(r, 400));
    ws.send({ type: 'agent_invoke', session_id: 'sess_alice_only', agent_id: 'sec-a', message: { role: 'user', content: 'hi' } });
    await ws.next('done');
    const session = await s.orm.em.fork().execute<{ user_id: string }[]>("SELECT user_id FROM sessions WHERE session_id = 'sess_alice_only'");
    expect(session[0]!.user_id).toBe('alice');
    ws.close();
  });
});

describe('stored credentials', () => {
  it("keeps agent bearer tokens as secrets of the store, sealed, and still presents them to the agent", async () => {
    const rows = await s.orm.em.fork().execute<{ auth_token: string }[]>("SELECT auth_token FROM agents WHERE agent_id = 'sec-a'");
    expect(rows[0]!.auth_token).toBe('secret:agent.sec-a');
    const stored = await s.orm.em.fork().execute<{ sealed: string }[]>("SELECT sealed FROM secrets WHERE name = 'agent.sec-a'");
    expect(stored[0]!.sealed).toMatch(/^v1:/);
    expect(stored[0]!.sealed).not.toContain(AGENT_SECRET);
    const run = await liveRun(s, agent, { agentId: 'sec-a' });
    expect(run.inv.headers.authorization).toBe(`Bearer ${AGENT_SECRET}`);
    end(run);
  });

  it("rotates an agent's token when it registers again: the new one is used at once", async () => {
    const rotated = `${AGENT_SECRET}-rotated`;
    const res = await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'sec-a', name: 'sec-a', endpoint: agent.url, auth: { type: 'bearer', token: rotated } } });
    expect(res.status).toBe(200);
    const versions = (await (await s.http('/v1/secrets')).json()).secrets.filter((x: { name: string }) => x.name === 'agent.sec-a');
    expect(versions.map((v: { version: number }) => v.version)).toEqual([2, 1]);
    const run = await liveRun(s, agent, { agentId: 'sec-a' });
    expect(run.inv.headers.authorization).toBe(`Bearer ${rotated}`);
    end(run);
    // And an agent may name a secret of the store in place of a token.
    await s.http('/v1/secrets/shared-agent-token', { method: 'PUT', json: { value: 'from-the-store' } });
    expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'sec-a', name: 'sec-a', endpoint: agent.url, auth: { type: 'bearer', secret: 'shared-agent-token' } } })).status).toBe(200);
    const again = await liveRun(s, agent, { agentId: 'sec-a' });
    expect(again.inv.headers.authorization).toBe('Bearer from-the-store');
    end(again);
  });

  it('answers 401 before validating the query when no key is given', async () => {
    const res = await s.http('/v1/memory/search', { key: null });
    expect(res.status).toBe(401);
    expect((await res.json()).error.code).toBe('unauthenticated');
  });
});
