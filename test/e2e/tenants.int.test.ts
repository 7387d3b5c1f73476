// Two tenants, one platform: every route that names a resource answers another
// tenant exactly as it answers an id that does not exist, lists never show
// another tenant's rows, and a key pinned to users speaks for no one else.
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeys } from '../../src/access/api-keys.js';
import { importSamplePortfolios, pollUntilDone, request } from '../support/contracts.js';
import { startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';
import { liveRun, type LiveRun } from '../support/live-run.js';

let s: TestStack;
let agent: FakeAgent;
let run: LiveRun;
let other: string; // an admin key of tenant acme
let bobOnly: string; // a client key of the default tenant pinned to user bob
const a = {} as { approval: string; toolCall: string; context: string; ticket: string; execution: string };
const SECRET = 'alice-secret-7f3a';

beforeAll(async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'abc-tenants-'));
  const policyFile = path.join(dir, 'policy.json');
  await writeFile(policyFile, JSON.stringify({ version: 1, default: 'allow', rules: [{ id: 'ask', tools: ['echo'], decision: 'require_approval' }] }));
  s = await startTestStack({ policyFile, approvalTimeoutMs: 60_000, agentIdleTimeoutMs: 30_000, contracts: { workers: 1 } });
  await importSamplePortfolios(s.orm);
  const keys = new ApiKeys(s.orm);
  expect(await keys.createTenant('acme')).toBe(true);
  other = (await keys.create('acme-admin', { tenantId: 'acme' })).key;
  bobOnly = (await keys.create('bob-app', { scopes: ['client'], userIds: ['bob'] })).key;
  agent = await startFakeAgent();

  // Tenant default: an agent, a tool, a live run of alice's waiting on an approval, context, a finished ticket.
  expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'iso', name: 'iso', endpoint: agent.url } })).status).toBe(200);
  expect((await s.http('/v1/tools/register', { method: 'POST', json: { name: 'default.only', kind: 'http', endpoint: 'http://127.0.0.1:9/x' } })).status).toBe(200);
  run = await liveRun(s, agent, { agentId: 'iso', userId: 'alice', content: SECRET });
  const invoked = await (await s.http('/v1/tools/echo:invoke', { method: 'POST', key: run.token, json: { run_id: run.runId, args: { note: SECRET } } })).json();
  expect(invoked.status).toBe('pending');
  a.toolCall = invoked.tool_call_id;
  a.approval = (await run.ws.next('approval_required')).approval_id;
  a.context = (await (await s.http('/v1/context', { method: 'POST', json: { owner_type: 'session', owner_id: run.sessionId, data: { SECRET } } })).json()).blob.context_key;
  const submitted = await (await s.http('/v1/contracts:submit', { method: 'POST', json: request({ correlation: { idempotency_key: 'shared-key', session_id: run.sessionId } }) })).json();
  a.ticket = submitted.task.ticket;
  expect((await pollUntilDone(s.http, a.ticket)).status).toBe('SUCCEEDED');
  const timeline = await (await s.http(`/api/execution/${run.sessionId}/timeline`)).json();
  a.execution = timeline.contracts[0].execution_id;
});
afterAll(async () => {
  run?.release();
  run?.ws.close();
  await agent?.close();
  await s?.close();
});

const body = async (res: Response) => ({ status: res.status, text: await res.text() });

/** A route that names a resource: how tenant acme is answered for the default tenant's id, and for an id nobody has. */
type Init = RequestInit & { json?: unknown };
const ROUTES: [string, (id: () => string) => [string, Init?], () => string][] = [
  ['GET run', (id) => [`/v1/runs/${id()}`], () => run.runId],
  ['cancel run', (id) => [`/v1/runs/${id()}:cancel`, { method: 'POST', json: {} }], () => run.runId],
  ['run events', (id) => [`/v1/runs/${id()}/events`], () => run.runId],
  ['run event stream', (id) => [`/v1/runs/${id()}/events/stream`], () => run.runId],
  ['run consequences', (id) => [`/v1/runs/${id()}/consequences`], () => run.runId],
  ['session messages', (id) => [`/v1/sessions/${id()}/messages`], () => run.sessionId],
  ['session timeline', (id) => [`/api/execution/${id()}/timeline`], () => run.sessionId],
  ['session consequences', (id) => [`/api/execution/${id()}/consequences`], () => run.sessionId],
  ['execution snapshot', (id) => [`/api/execution/${id()}/snapshot`], () => a.execution],
  ['tool call', (id) => [`/v1/tool_calls/${id()}`], () => a.toolCall],
  ['wait tool call', (id) => [`/v1/tool_calls/${id()}:wait`, { method: 'POST', json: { timeout_ms: 0 } }], () => a.toolCall],
  ['decide approval', (id) => [`/v1/approvals/${id()}:decide`, { method: 'POST', json: { decision: 'approve' } }], () => a.approval],
  ['invoke a tool for a run', (id) => ['/v1/tools/echo:invoke', { method: 'POST', json: { run_id: id(), args: {} } }], () => run.runId],
  ['context blob', (id) => [`/v1/context/${id()}`], () => a.context],
  ['ticket', (id) => [`/v1/tickets/${id()}`], () => a.ticket],
  ['ticket trace', (id) => [`/v1/tickets/${id()}/trace`], () => a.ticket],
  ['ticket context', (id) => [`/v1/tickets/${id()}/context`], () => a.ticket],
  ['ticket artifact', (id) => [`/v1/tickets/${id()}/artifact`], () => a.ticket],
  ['cancel ticket', (id) => [`/v1/tickets/${id()}:cancel`, { method: 'POST', json: {} }], () => a.ticket],
  ['ticket feedback', (id) => [`/v1/tickets/${id()}:feedback`, { method: 'POST', json: { action: 'continue' } }], () => a.ticket],
  ['invoke agent', (id) => [`/v1/agents/${id()}:invoke`, { method: 'POST', json: { parent_run_id: 'run_none', input_message: { role: 'user', content: 'x' } } }], () => 'iso'],
  ['heartbeat agent', (id) => [`/v1/agents/${id()}/heartbeat`, { method: 'POST', json: {} }], () => 'iso'],
];

describe('another tenant', () => {
  it.each(ROUTES)('%s: answered as an id that does not exist, never with the data', async (_name, route, idOf) => {
    const [p, init = {}] = route(idOf);
    const theirs = await body(await s.http(p, { ...init, key: other }));
    const [q, init2 = {}] = route(() => `${idOf()}x`);
    const nobody = await body(await s.http(q, { ...init2, key: other }));
    expect(theirs.status).toBeLessThan(500);
    expect(theirs.status).toBe(nobody.status);
    // The same answer, but for the id it names (a view of nothing names what it was asked for).
    const masked = (text: string, id: string) => {
      const json = JSON.parse(text.replaceAll(id, 'ID'));
      if (json.error) delete json.error.trace_id; // each request has its own
      return JSON.stringify(json);
    };
    expect(masked(theirs.text, idOf())).toBe(masked(nobody.text, `${idOf()}x`));
    expect(theirs.text).not.toContain(SECRET);
  });

  it('writes its own context under a key the other tenant uses, and neither sees the other', async () => {
    const put = await s.http('/v1/context', { method: 'POST', key: other, json: { context_key: a.context, owner_type: 'session', owner_id: 'acme-session', data: { acme: true } } });
    expect(put.status).toBe(200);
    expect((await put.json()).blob).toMatchObject({ version: 1, data: { acme: true } });
    expect((await (await s.http(`/v1/context/${a.context}`, { key: other })).json()).blob.data).toEqual({ acme: true });
    expect((await (await s.http(`/v1/context/${a.context}`)).json()).blob).toMatchObject({ version: 1, data: { SECRET } });
  });

  it('sees none of its rows in lists, metrics or memory', async () => {
    const get = async (p: string) => (await s.http(p, { key: other })).json();
    expect((await get('/v1/agents')).agents).toEqual([]);
    expect((await get('/v1/tools')).tools.map((t: { name: string }) => t.name)).not.toContain('default.only');
    expect((await get(`/v1/approvals?session_id=${run.sessionId}`)).approvals).toEqual([]);
    expect((await get('/v1/metrics/runs')).total).toBe(0);
    expect((await get('/v1/metrics/tools')).tools).toEqual([]);
    expect((await get('/v1/memory/search?scope=GLOBAL&q=success')).entries).toEqual([]);
    // The owner sees them all.
    expect((await (await s.http('/v1/agents')).json()).agents.map((x: { agent_id: string }) => x.agent_id)).toContain('iso');
    expect((await (await s.http('/v1/memory/search?scope=GLOBAL&q=success')).json()).entries.length).toBeGreaterThan(0);
    expect((await (await s.http('/v1/metrics/runs')).json()).total).toBeGreaterThan(0);
  });

  it('keeps its own agent ids, idempotency keys and sessions apart from the same names elsewhere', async () => {
    // The same agent id, registered by both: each tenant invokes its own.
    const own = await s.http('/v1/agents/register', { method: 'POST', key: other, json: { agent_id: 'iso', name: 'acme iso', endpoint: agent.url } });
    expect(own.status).toBe(200);
    expect((await (await s.http('/v1/agents', { key: other })).json()).agents).toMatchObject([{ agent_id: 'iso', name: 'acme iso' }]);
    expect((await (await s.http('/v1/agents')).json()).agents.find((x: { agent_id: string }) => x.agent_id === 'iso').name).toBe('iso');
    // The same idempotency key is a new ticket, not the default tenant's.
    const submitted = await (await s.http('/v1/contracts:submit', { method: 'POST', key: other, json: request({ correlation: { idempotency_key: 'shared-key' } }) })).json();
    expect(submitted.task.ticket).not.toBe(a.ticket);
    // The same session id cannot be taken over.
    const ws = await new WsClient(s.url).open();
    ws.send({ type: 'hello', api_key: other, user_id: 'alice' });
    await ws.next('hello_ack');
    ws.send({ type: 'resume', session_id: run.sessionId, cursor: '0' });
    expect((await ws.next('error')).code).toBe('invalid_request');
    ws.send({ type: 'agent_invoke', session_id: run.sessionId, agent_id: 'iso', message: { role: 'user', content: 'hi' } });
    expect((await ws.next('error')).message).toContain('not found');
    ws.send({ type: 'cancel', run_id: run.runId });
    expect((await ws.next('error')).message).toContain('not found');
    ws.close();
    expect(ws.frames.map((f) => JSON.stringify(f)).join('')).not.toContain(SECRET);
  });
});

describe('a key pinned to users', () => {
  it('speaks only for them', async () => {
    const ws = await new WsClient(s.url).open();
    ws.send({ type: 'hello', api_key: bobOnly, user_id: 'alice' });
    expect(await ws.next('error')).toMatchObject({ code: 'forbidden' });
    const bob = await new WsClient(s.url).open();
    bob.send({ type: 'hello', api_key: bobOnly });
    expect((await bob.next('hello_ack')).user_id).toBe('bob');
    bob.close();
  });

  it("cannot read or decide another user's runs, sessions or approvals", async () => {
    for (const p of [`/v1/runs/${run.runId}`, `/v1/sessions/${run.sessionId}/messages`, `/v1/tool_calls/${a.toolCall}`]) {
      expect((await s.http(p, { key: bobOnly })).status, p).toBe(404);
    }
    expect((await (await s.http(`/v1/approvals?session_id=${run.sessionId}`, { key: bobOnly })).json()).approvals).toEqual([]);
    const decide = await s.http(`/v1/approvals/${a.approval}:decide`, { method: 'POST', key: bobOnly, json: { decision: 'approve' }, headers: { 'x-user-id': 'alice' } });
    expect(decide.status).toBe(404);
    // Still pending for alice.
    expect((await (await s.http(`/v1/approvals?session_id=${run.sessionId}`)).json()).approvals[0].status).toBe('PENDING');
  });

  it('lacks the scopes it was not given', async () => {
    const res = await s.http('/v1/tools/register', { method: 'POST', key: bobOnly, json: { name: 'x', kind: 'http', endpoint: 'http://127.0.0.1:9/x' } });
    expect(res.status).toBe(403);
    expect((await res.json()).error).toMatchObject({ code: 'forbidden', details: { scope: 'operator' } });
  });
});
