// An approval nobody decides expires: the call times out and client and agent both hear it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';

let s: TestStack;
let agent: FakeAgent;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'abc-expiry-'));
  const policyFile = path.join(dir, 'policy.json');
  await writeFile(policyFile, JSON.stringify({ version: 1, default: 'require_approval', rules: [] }));
  // The agent waits on purpose: its idle timeout must not end the run before the approval expires.
  s = await startTestStack({ policyFile, approvalTimeoutMs: 300, timerSweepMs: 50, agentIdleTimeoutMs: 30_000 });
  agent = await startFakeAgent(async (inv, res) => {
    sse(res, 'delta', { text: 'asking' });
    await inv.closed;
  });
  await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'asker', name: 'Asker', endpoint: agent.url } });
});
afterAll(async () => {
  await agent.close();
  await s.close();
  await rm(dir, { recursive: true, force: true });
});

describe('approval expiry', () => {
  it('expires the approval, times the call out with approval_timeout, and resumes the run', async () => {
    const ws = await new WsClient(s.url).open();
    ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
    ws.send({ type: 'agent_invoke', session_id: `sess_expiry_${Date.now()}`, agent_id: 'asker', message: { role: 'user', content: 'go' } });
    const delta = await ws.next('delta');
    const token = String(agent.invocations.at(-1)!.headers['x-abc-run-token']);
    const pending = await (await s.http('/v1/tools/echo:invoke', { method: 'POST', key: token, json: { run_id: delta.run_id, args: { x: 1 } } })).json();
    expect(pending).toMatchObject({ status: 'pending', reason: 'waiting_approval' });
    await ws.next('approval_required');

    const waited = await (await s.http(`/v1/tool_calls/${pending.tool_call_id}:wait?timeout_ms=5000`, { method: 'POST', key: token })).json();
    expect(waited).toMatchObject({ status: 'timeout', error: { code: 'approval_timeout' } });
    expect(await ws.next('error')).toMatchObject({ code: 'approval_timeout', run_id: delta.run_id });
    const [approval] = (await (await s.http(`/v1/approvals?run_id=${delta.run_id}`)).json()).approvals;
    expect(approval).toMatchObject({ status: 'EXPIRED', decided_by: 'system' });
    expect((await (await s.http(`/v1/runs/${delta.run_id}`)).json()).run.status).toBe('RUNNING');

    const late = await s.http(`/v1/approvals/${approval.approval_id}:decide`, { method: 'POST', json: { decision: 'approve' }, headers: { 'x-user-id': 'u1' } });
    expect(late.status).toBe(409);
    ws.close();
  });
});
