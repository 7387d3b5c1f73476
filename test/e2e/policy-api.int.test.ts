// The policy stored over the API: versioned, refused unless its version is
// above every stored one, and taken by every core at once (two cores on one
// database); the document with the higher version, the file's or the API's, is in force.
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GetPolicyRequest, InvokeToolRequest } from '../../gen/abc/orchestrator/v1/tool.js';
import { closeCore, connectCore, type CoreClients } from '../../gateway/core-client.js';
import { startCore, type Core } from '../../src/main/core.js';
import { readEvents } from '../../src/store/event-log.js';
import { coreOptions, FAST_RETRY } from '../support/core.js';
import { startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { unary, withKey } from '../support/grpc.js';
import { liveRun } from '../support/live-run.js';

let s: TestStack;
let b: Core;
let bClients: CoreClients;
let agent: FakeAgent;

beforeAll(async () => {
  const policyFile = path.join(await mkdtemp(path.join(os.tmpdir(), 'abc-policy-api-')), 'policy.json');
  await writeFile(policyFile, JSON.stringify({ version: 2, default: 'allow', rules: [] }));
  s = await startTestStack({ policyFile, agentIdleTimeoutMs: 30_000 });
  b = await startCore(coreOptions(s.orm, { retry: FAST_RETRY, drainTimeoutMs: 1000 }));
  bClients = connectCore(b.address);
  agent = await startFakeAgent();
  expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'pol', name: 'pol', endpoint: agent.url } })).status).toBe(200);
});
afterAll(async () => {
  await agent?.close();
  closeCore(bClients);
  await b?.close();
  await s?.close();
});

const BLOCK_ECHO = { version: 3, default: 'allow', rules: [{ id: 'no-echo', tools: ['echo'], decision: 'block', reason: 'echo is off' }] };

describe('the policy over the API', () => {
  it('starts from the file, and refuses a document that is not a policy', async () => {
    expect(await (await s.http('/v1/policy')).json()).toMatchObject({ source: 'file', policy: { version: 2 } });
    const bad = await s.http('/v1/policy', { method: 'PUT', json: { version: 3, default: 'perhaps', rules: [] } });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.message).toContain('the policy is not valid');
    // A version past what the store keeps is bad input, not a database error.
    expect((await s.http('/v1/policy', { method: 'PUT', json: { version: 2 ** 40, default: 'allow', rules: [] } })).status).toBe(400);
  });

  it('stores a new version that every core decides by at once', async () => {
    const put = await s.http('/v1/policy', { method: 'PUT', json: BLOCK_ECHO });
    expect(put.status).toBe(200);
    expect(await put.json()).toMatchObject({ version: 3 });
    // The other core took it from its notification.
    await expect.poll(async () => (await unary(bClients.tools.getPolicy.bind(bClients.tools), GetPolicyRequest.fromPartial({}), withKey(s.key))).source).toBe('api');

    const run = await liveRun(s, agent, { agentId: 'pol' });
    for (const tools of [s.clients.tools, bClients.tools]) {
      const res = await unary(tools.invokeTool.bind(tools), InvokeToolRequest.fromPartial({ toolName: 'echo', runId: run.runId, args: { on: String(tools === s.clients.tools) } }), withKey(run.token));
      expect(res.error).toMatchObject({ code: 'blocked' });
    }
    const decisions = (await readEvents(s.orm.em.fork(), { runId: run.runId, types: ['policy_decision'] }, '0', 10)).map((e) => e.payload);
    expect(decisions).toEqual([expect.objectContaining({ rule_id: 'no-echo', policy_version: 3 }), expect.objectContaining({ rule_id: 'no-echo', policy_version: 3 })]);
    run.release();
    run.ws.close();
  });

  it('refuses a version that is not above every stored one', async () => {
    const res = await s.http('/v1/policy', { method: 'PUT', json: { ...BLOCK_ECHO, rules: [] } });
    expect(res.status).toBe(409);
    expect((await res.json()).error).toMatchObject({ code: 'policy_version_conflict', details: { stored_version: 3 } });
  });
});
