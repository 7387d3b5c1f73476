// An agent says `done` while its run waits on a human: the run is not ended under
// the human; once the approval is given, the agent is invoked again in resume mode.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { readEvents } from '../../src/store/event-log.js';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';

let s: TestStack;
let agent: FakeAgent;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'abc-done-paused-'));
  const policyFile = path.join(dir, 'policy.json');
  await writeFile(policyFile, JSON.stringify({ version: 1, default: 'allow', rules: [{ id: 'confirm-echo', tools: ['echo'], decision: 'require_approval' }] }));
  s = await startTestStack({ policyFile, runLeaseMs: 400, agentIdleTimeoutMs: 10_000 });
  agent = await startFakeAgent(async (inv, res) => {
    if (inv.body.context?.resume) {
      sse(res, 'delta', { text: 'after the approval' });
      sse(res, 'done', { usage: {}, final_message: 'finished with the approved result' });
      return void res.end();
    }
    // Asks for an approval, then (wrongly) says done at once.
    const token = String(inv.headers['x-abc-run-token']);
    const asked = await fetch(`${s.url}/v1/tools/echo:invoke`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ run_id: inv.body.run_id, args: { x: 1 } }),
    });
    expect(((await asked.json()) as { status: string }).status).toBe('pending');
    sse(res, 'done', { usage: {}, final_message: 'done too early' });
    res.end();
  });
  expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'hasty', name: 'Hasty', endpoint: agent.url } })).status).toBe(200);
});
afterAll(async () => {
  await agent.close();
  await s.close();
  await rm(dir, { recursive: true, force: true });
});

it('records the early done, waits for the human, then resumes the agent and completes', async () => {
  const ws = await new WsClient(s.url).open();
  ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
  ws.send({ type: 'agent_invoke', session_id: 'sess_hasty', agent_id: 'hasty', message: { role: 'user', content: 'go' } });
  const asked = await ws.next('approval_required');
  const runId = asked.run_id as string;
  await expect.poll(async () => (await readEvents(s.orm.em.fork(), { runId, types: ['agent_done_while_paused'] }, '0', 5)).length).toBe(1);
  expect((await (await s.http(`/v1/runs/${runId}`)).json()).run.status).toBe('PAUSED_WAITING_APPROVAL');

  ws.send({ type: 'approval_decision', run_id: runId, approval_id: asked.approval_id, decision: 'approve' });
  const done = await ws.next('done');
  expect(done.final_message).toBe('finished with the approved result');
  expect(agent.invocations).toHaveLength(2);
  expect(agent.invocations[1]!.body.context).toMatchObject({ resume: { reason: 'agent_done_while_paused' } });
  expect((await (await s.http(`/v1/runs/${runId}`)).json()).run.status).toBe('DONE');
  ws.close();
}, 30_000);
