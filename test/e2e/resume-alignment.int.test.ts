// Seed 004 resume alignment: an irreversible action whose idempotency key has
// already completed is never run again, even once the tool-call key has expired.
import { mkdtemp, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { liveRun } from '../support/live-run.js';

let s: TestStack;
let agent: FakeAgent;
let hook: http.Server;
let sends = 0;

beforeAll(async () => {
  agent = await startFakeAgent();
  hook = http.createServer(async (req, res) => {
    for await (const _ of req);
    sends++;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"sent":true}');
  });
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
  // email.confirm needs an approval: an approved call's check is made when it starts.
  const policyFile = path.join(await mkdtemp(path.join(os.tmpdir(), 'abc-alignment-')), 'policy.json');
  await writeFile(policyFile, JSON.stringify({ version: 1, default: 'allow', rules: [{ id: 'confirm', tools: ['email.confirm'], decision: 'require_approval' }] }));
  // Tool-call idempotency keys expire after 100 ms here, so only the contract check stands between a retry and a second send.
  s = await startTestStack({ idempotencyTtlMs: 100, policyFile });
  const url = `http://127.0.0.1:${(hook.address() as AddressInfo).port}`;
  expect((await s.http('/v1/tools/register', { method: 'POST', json: { name: 'email.send', kind: 'http', endpoint: url, side_effect: true } })).status).toBe(200);
  expect((await s.http('/v1/tools/register', { method: 'POST', json: { name: 'email.confirm', kind: 'http', endpoint: url, side_effect: true } })).status).toBe(200);
  expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'mailer', name: 'Mailer', endpoint: agent.url } })).status).toBe(200);
});
afterAll(async () => {
  await s?.close();
  await agent?.close();
  hook.closeAllConnections();
  await new Promise((r) => hook.close(r));
});

it('refuses to send again under an idempotency key that already completed', async () => {
  const run = await liveRun(s, agent, { agentId: 'mailer', content: 'invite bob' });
  const token = run.token;
  const send = () =>
    s.http('/v1/tools/email.send:invoke', { method: 'POST', key: token, json: { run_id: run.runId, args: { to: 'bob@example.com' }, idempotency_key: 'email:send:a1b2c3d4' } }).then((r) => r.json());

  const first = await send();
  const wait = (id: string) => s.http(`/v1/tool_calls/${id}:wait?timeout_ms=5000`, { method: 'POST', key: token }).then((r) => r.json());
  expect((await wait(first.tool_call_id)).status).toBe('succeeded');
  await new Promise((r) => setTimeout(r, 200)); // the tool-call key expires

  const second = await send();
  expect(second.tool_call_id).not.toBe(first.tool_call_id);
  const refused = await wait(second.tool_call_id);
  expect(refused).toMatchObject({ status: 'failed', error: { code: 'already_completed' } });
  expect(sends).toBe(1);

  const c = await (await s.http(`/api/execution/${run.sessionId}/consequences`)).json();
  expect(c.views.map((v: { consequence_label: string; has_side_effects: boolean }) => [v.consequence_label, v.has_side_effects])).toEqual([['SUCCESS', true], ['FAILED', false]]);
  run.release();
  run.ws.close();
});

it('refuses to run an approved call whose key already completed, once the approval is given', async () => {
  const run = await liveRun(s, agent, { agentId: 'mailer', content: 'confirm bob' });
  const before = sends;
  const wait = (id: string) => s.http(`/v1/tool_calls/${id}:wait?timeout_ms=5000`, { method: 'POST', key: run.token }).then((r) => r.json());
  const approveAndWait = async () => {
    const call = await s
      .http('/v1/tools/email.confirm:invoke', { method: 'POST', key: run.token, json: { run_id: run.runId, args: { to: 'bob@example.com' }, idempotency_key: 'email:confirm:e5f6' } })
      .then((r) => r.json());
    expect(call).toMatchObject({ status: 'pending', reason: 'waiting_approval' });
    const { approvals } = await (await s.http(`/v1/approvals?run_id=${run.runId}&status=PENDING`)).json();
    const asked = approvals.find((a: { tool_call_id: string }) => a.tool_call_id === call.tool_call_id);
    const decided = await s.http(`/v1/approvals/${asked.approval_id}:decide`, { method: 'POST', json: { decision: 'approve' }, headers: { 'x-user-id': 'u1' } });
    expect(decided.status).toBe(200);
    return wait(call.tool_call_id);
  };

  expect((await approveAndWait()).status).toBe('succeeded');
  await new Promise((r) => setTimeout(r, 200)); // the tool-call key expires
  expect(await approveAndWait()).toMatchObject({ status: 'failed', error: { code: 'already_completed' } });
  expect(sends - before).toBe(1);
  run.release();
  run.ws.close();
});
