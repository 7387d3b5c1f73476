// Seed 004 resume alignment: an irreversible action whose idempotency key has
// already completed is never run again, even once the tool-call key has expired.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
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
  // Tool-call idempotency keys expire after 100 ms here, so only the contract check stands between a retry and a second send.
  s = await startTestStack({ idempotencyTtlMs: 100 });
  const url = `http://127.0.0.1:${(hook.address() as AddressInfo).port}`;
  expect((await s.http('/v1/tools/register', { method: 'POST', json: { name: 'email.send', kind: 'http', endpoint: url, side_effect: true } })).status).toBe(200);
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
