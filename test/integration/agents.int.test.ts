// The agent registry: register, list without secrets, health checks, heartbeat loss, deregistration.
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RegisterAgentRequest } from '../../gen/abc/orchestrator/v1/agent.js';
import { startTestCore, type TestCore } from '../support/core.js';
import { countRuns } from '../support/db.js';
import { startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { failure, unary, withKey } from '../support/grpc.js';
import { ImClient } from '../support/im.js';

let t: TestCore;
let agent: FakeAgent;

beforeAll(async () => {
  t = await startTestCore({ agentHeartbeatIntervalMs: 100, agentUnhealthyAfterMs: 400 });
  agent = await startFakeAgent();
});
afterAll(async () => {
  await agent.close();
  await t.close();
});

const register = (req: Partial<RegisterAgentRequest>) =>
  unary(t.clients.agents.registerAgent.bind(t.clients.agents), RegisterAgentRequest.fromPartial(req), withKey(t.key));
const list = () => unary(t.clients.agents.listAgents.bind(t.clients.agents), {}, withKey(t.key)).then((r) => r.agents);

describe('agent registry', () => {
  it('registers an agent and lists it healthy, never echoing its token', async () => {
    const res = await register({ agentId: 'weather_agent', name: 'Weather', endpoint: agent.url, capabilities: ['weather_query'], auth: { type: 'bearer', token: 'super-secret-token', secret: '' } });
    expect(res.ok).toBe(true);
    expect(res.registeredAt).toBeGreaterThan(Date.now() - 10_000);
    const listed = (await list()).find((a) => a.agentId === 'weather_agent')!;
    expect(listed).toMatchObject({ name: 'Weather', status: 'AGENT_STATUS_HEALTHY', capabilities: ['weather_query'] });
    expect(listed.lastHeartbeatAt).toBeGreaterThan(0);
    expect(JSON.stringify(res) + JSON.stringify(listed)).not.toContain('super-secret-token');
  });

  it('rejects a bad registration naming the field', async () => {
    const error = await failure(register({ agentId: 'x', name: 'X', endpoint: 'not a url' }));
    expect(error.code).toBe(status.INVALID_ARGUMENT);
    expect(error.details).toContain('endpoint');
  });

  it('marks an agent unhealthy after no successful check for the threshold, and refuses to invoke it', async () => {
    const flaky = await startFakeAgent();
    await register({ agentId: 'flaky', name: 'Flaky', endpoint: flaky.url });
    flaky.health = 500;
    await expect.poll(async () => (await list()).find((a) => a.agentId === 'flaky')!.status, { timeout: 5000, interval: 50 }).toBe('AGENT_STATUS_UNHEALTHY');
    const listed = (await list()).find((a) => a.agentId === 'flaky')!;
    expect(listed.statusReason).toContain('500');

    const im = new ImClient(t.clients);
    im.hello(t.key);
    await im.next('helloAck');
    const sessionId = `sess_flaky_${Date.now()}`;
    im.send({ $case: 'agentInvoke', value: { agentId: 'flaky', message: { role: 'user', content: 'hi' } } }, { sessionId });
    expect((await im.next('error')).frame).toMatchObject({ value: { code: 'agent_error', message: expect.stringContaining('unhealthy') } });
    expect(await countRuns(t.orm, sessionId)).toBe(0);

    // A successful check brings it back.
    flaky.health = 200;
    await expect.poll(async () => (await list()).find((a) => a.agentId === 'flaky')!.status, { timeout: 5000, interval: 50 }).toBe('AGENT_STATUS_HEALTHY');
    im.close();
    await flaky.close();
  });

  it('accepts an explicit heartbeat', async () => {
    await register({ agentId: 'beats', name: 'Beats', endpoint: agent.url });
    const before = (await list()).find((a) => a.agentId === 'beats')!.lastHeartbeatAt;
    await new Promise((r) => setTimeout(r, 5));
    const beat = await unary(t.clients.agents.heartbeat.bind(t.clients.agents), { agentId: 'beats' }, withKey(t.key));
    expect(beat.agent!.lastHeartbeatAt).toBeGreaterThan(before);
    const missing = await failure(unary(t.clients.agents.heartbeat.bind(t.clients.agents), { agentId: 'ghost' }, withKey(t.key)));
    expect(missing.code).toBe(status.NOT_FOUND);
  });

  it('deregisters an agent: gone from the list and from invocation, once', async () => {
    await register({ agentId: 'leaving', name: 'Leaving', endpoint: agent.url });
    const deregister = () => unary(t.clients.agents.deregisterAgent.bind(t.clients.agents), { agentId: 'leaving' }, withKey(t.key));
    expect((await deregister()).agent).toMatchObject({ agentId: 'leaving', name: 'Leaving' });
    expect((await list()).map((a) => a.agentId)).not.toContain('leaving');
    expect((await failure(deregister())).code).toBe(status.NOT_FOUND);

    const im = new ImClient(t.clients);
    im.hello(t.key);
    await im.next('helloAck');
    im.send({ $case: 'agentInvoke', value: { agentId: 'leaving', message: { role: 'user', content: 'hi' } } }, { sessionId: `sess_leaving_${Date.now()}` });
    expect((await im.next('error')).frame).toMatchObject({ value: { code: 'agent_error', message: expect.stringContaining('not registered') } });
    im.close();
  });
});

describe('context store', () => {
  const put = (req: { contextKey?: string; ownerType?: string; ownerId?: string; data?: unknown; expectedVersion?: number }) =>
    unary(t.clients.context.putContext.bind(t.clients.context), { contextKey: '', ownerType: 'agent', ownerId: 'a1', data: null, ...req }, withKey(t.key));
  const get = (contextKey: string, version?: number) => unary(t.clients.context.getContext.bind(t.clients.context), { contextKey, version }, withKey(t.key));

  it('versions blobs and keeps old versions readable', async () => {
    const v1 = await put({ data: { notes: ['a'] } });
    expect(v1.blob).toMatchObject({ version: 1, ownerType: 'agent', ownerId: 'a1', data: { notes: ['a'] } });
    const key = v1.blob!.contextKey;
    const v2 = await put({ contextKey: key, data: { notes: ['a', 'b'] }, expectedVersion: 1 });
    expect(v2.blob!.version).toBe(2);
    expect((await get(key)).blob!.data).toEqual({ notes: ['a', 'b'] });
    expect((await get(key, 1)).blob!.data).toEqual({ notes: ['a'] });
  });

  it('refuses a write whose expected_version has moved on', async () => {
    const key = (await put({ data: 1 })).blob!.contextKey;
    await put({ contextKey: key, data: 2, expectedVersion: 1 });
    const conflict = await failure(put({ contextKey: key, data: 3, expectedVersion: 1 }));
    expect(conflict.code).toBe(status.ABORTED);
    expect(conflict.details).toContain('at version 2, not 1');
    expect((await get(key)).blob!.data).toBe(2);
  });

  it('answers NOT_FOUND for an unknown key', async () => {
    expect((await failure(get('ctx_missing'))).code).toBe(status.NOT_FOUND);
  });
});
