// Policies stored over the API: the platform's, and each tenant's own.
// Versioned, refused unless the version is above every one its owner stored,
// and taken by every core at once (two cores on one database). The platform's
// is the file's or the API's, whichever has the higher version; a tenant's own
// decides only its calls, and can tighten the platform's but never loosen it.
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GetPolicyRequest, InvokeToolRequest } from '../../gen/abc/orchestrator/v1/tool.js';
import { closeCore, connectCore, type CoreClients } from '../../gateway/core-client.js';
import { ApiKeys } from '../../src/access/api-keys.js';
import { startCore, type Core } from '../../src/main/core.js';
import { readEvents } from '../../src/store/event-log.js';
import { coreOptions, FAST_RETRY } from '../support/core.js';
import { startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { unary, withKey } from '../support/grpc.js';
import { liveRun, type LiveRun } from '../support/live-run.js';

let s: TestStack;
let b: Core;
let bClients: CoreClients;
let agent: FakeAgent;
let acme: string; // an admin key of tenant acme
let acmeOps: string; // an operator key of tenant acme

beforeAll(async () => {
  const policyFile = path.join(await mkdtemp(path.join(os.tmpdir(), 'abc-policy-api-')), 'policy.json');
  await writeFile(policyFile, JSON.stringify({ version: 2, default: 'allow', rules: [] }));
  s = await startTestStack({ policyFile, agentIdleTimeoutMs: 30_000 });
  b = await startCore(coreOptions(s.orm, { retry: FAST_RETRY, drainTimeoutMs: 1000 }));
  bClients = connectCore(b.address);
  agent = await startFakeAgent();
  const keys = new ApiKeys(s.orm);
  await keys.createTenant('acme');
  acme = (await keys.create('acme-admin', { tenantId: 'acme' })).key;
  acmeOps = (await keys.create('acme-ops', { tenantId: 'acme', scopes: ['operator'] })).key;
  for (const key of [s.key, acme]) expect((await s.http('/v1/agents/register', { method: 'POST', key, json: { agent_id: 'pol', name: 'pol', endpoint: agent.url } })).status).toBe(200);
});
afterAll(async () => {
  await agent?.close();
  closeCore(bClients);
  await b?.close();
  await s?.close();
});

const BLOCK_ECHO = { version: 3, default: 'allow', rules: [{ id: 'no-echo', tools: ['echo'], decision: 'block', reason: 'echo is off' }] };
const policy = async (key: string, platform = false) => (await s.http(`/v1/policy${platform ? '?platform=true' : ''}`, { key })).json();
const put = (key: string, json: unknown, platform = false) => s.http(`/v1/policy${platform ? '?platform=true' : ''}`, { method: 'PUT', key, json });

/** Calls echo from the run on the given core, and returns the answer. */
const echo = (run: LiveRun, clients: CoreClients, args: Record<string, unknown> = {}) =>
  unary(clients.tools.invokeTool.bind(clients.tools), InvokeToolRequest.fromPartial({ toolName: 'echo', runId: run.runId, args }), withKey(run.token));
const decisions = async (run: LiveRun) => (await readEvents(s.orm.em.fork(), { runId: run.runId, types: ['policy_decision'] }, '0', 10)).map((e) => e.payload);
const end = (run: LiveRun) => (run.release(), run.ws.close());

describe('policies over the API', () => {
  it('the platform starts from the file, a tenant from none, and documents that are not policies are refused', async () => {
    expect(await policy(s.key, true)).toMatchObject({ source: 'file', scope: 'platform', policy: { version: 2 } });
    expect(await policy(acmeOps)).toEqual({ source: 'none', scope: 'tenant', policy: null });
    const bad = await put(acmeOps, { version: 3, default: 'perhaps', rules: [] });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.message).toContain('the policy is not valid');
    // A version past what the store keeps is bad input, not a database error.
    expect((await put(acmeOps, { version: 2 ** 40, default: 'allow', rules: [] })).status).toBe(400);
  });

  it("a tenant's policy decides its own calls, on every core, and no other tenant's", async () => {
    const stored = await put(acmeOps, BLOCK_ECHO);
    expect(stored.status).toBe(200);
    expect(await stored.json()).toMatchObject({ version: 3 });
    expect(await policy(acme)).toMatchObject({ source: 'api', scope: 'tenant', policy: { version: 3 } });
    // The other core took it from its notification.
    await expect.poll(async () => (await unary(bClients.tools.getPolicy.bind(bClients.tools), GetPolicyRequest.fromPartial({}), withKey(acmeOps))).source).toBe('api');

    const theirs = await liveRun(s, agent, { agentId: 'pol', key: acme });
    // Other args each time: the same args would be the same (idempotent) call.
    for (const clients of [s.clients, bClients]) expect((await echo(theirs, clients, { on: clients === s.clients })).error).toMatchObject({ code: 'blocked' });
    expect(await decisions(theirs)).toEqual([
      expect.objectContaining({ rule_id: 'no-echo', policy_version: 3, policy_scope: 'tenant' }),
      expect.objectContaining({ rule_id: 'no-echo', policy_version: 3, policy_scope: 'tenant' }),
    ]);
    end(theirs);

    const ours = await liveRun(s, agent, { agentId: 'pol' });
    const answer = await echo(ours, s.clients, { hi: 1 });
    expect(answer.error).toBeUndefined();
    expect(answer.result).toMatchObject({ hi: 1 });
    expect(await decisions(ours)).toEqual([expect.objectContaining({ decision: 'allow', policy_version: 2, policy_scope: 'platform' })]);
    expect(await policy(s.key)).toMatchObject({ source: 'none' });
    end(ours);
  });

  it("a tenant's policy tightens the platform's but never loosens it", async () => {
    const platform = { version: 5, default: 'allow', rules: [{ id: 'quiet', tools: ['echo'], when: { args: { loud: { eq: true } } }, decision: 'block' }] };
    expect((await put(s.key, platform, true)).status).toBe(200);
    expect(await policy(s.key, true)).toMatchObject({ source: 'api', policy: { version: 5 } });
    expect((await put(acmeOps, { version: 4, default: 'allow', rules: [{ id: 'echo-ok', tools: ['echo'], decision: 'allow' }] })).status).toBe(200);

    const run = await liveRun(s, agent, { agentId: 'pol', key: acme });
    await expect.poll(async () => (await unary(bClients.tools.getPolicy.bind(bClients.tools), GetPolicyRequest.fromPartial({ platform: true }), withKey(s.key))).policy).toMatchObject({ version: 5 });
    expect((await echo(run, bClients, { loud: true })).error).toMatchObject({ code: 'blocked' });
    expect((await echo(run, s.clients, { loud: false })).error).toBeUndefined();
    expect(await decisions(run)).toEqual([
      expect.objectContaining({ decision: 'block', rule_id: 'quiet', policy_version: 5, policy_scope: 'platform' }),
      expect.objectContaining({ decision: 'allow', rule_id: 'echo-ok', policy_version: 4, policy_scope: 'tenant' }),
    ]);
    end(run);
  });

  it("only the default tenant's keys reach the platform's policy", async () => {
    const write = await put(acme, { version: 9, default: 'allow', rules: [] }, true);
    expect(write.status).toBe(403);
    expect((await write.json()).error).toMatchObject({ code: 'forbidden', details: { scope: 'admin', tenant: 'default' } });
    expect((await s.http('/v1/policy?platform=true', { key: acmeOps })).status).toBe(403);
    expect((await s.http('/v1/policy?platform=maybe', { key: acmeOps })).status).toBe(400);
  });

  it("refuses a version that is not above every one its owner stored; each owner counts its own", async () => {
    const res = await put(acmeOps, { ...BLOCK_ECHO, version: 4 });
    expect(res.status).toBe(409);
    expect((await res.json()).error).toMatchObject({ code: 'policy_version_conflict', details: { stored_version: 4 } });
    expect((await put(s.key, { version: 5, default: 'allow', rules: [] }, true)).status).toBe(409);
    expect((await put(s.key, { version: 1, default: 'allow', rules: [] })).status).toBe(200);
  });
});
