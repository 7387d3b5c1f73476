// Rate limits and quotas over the real gateway and core: per key (429 over
// HTTP, RESOURCE_EXHAUSTED over gRPC), runs going per tenant, and a flood of
// bad credentials from one address.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeys } from '../../src/access/api-keys.js';
import { startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';
import { failure, unary, withKey } from '../support/grpc.js';
import { liveRun } from '../support/live-run.js';
import { startGateway } from '../../gateway/server.js';
import { testLogger } from '../support/log.js';

let s: TestStack;
let agent: FakeAgent;

beforeAll(async () => {
  s = await startTestStack(
    { rateLimits: { key: { perSecond: 5, burst: 10 }, tenant: { perSecond: 0, burst: 0 } }, tenantMaxRuns: 1, agentIdleTimeoutMs: 30_000 },
    { authFailuresPerMinute: 20 },
  );
  agent = await startFakeAgent();
  expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'busy', name: 'busy', endpoint: agent.url } })).status).toBe(200);
});
afterAll(async () => {
  await agent?.close();
  await s?.close();
});

describe('per key', () => {
  it('answers 429 with retry_after_seconds past the rate, over HTTP', async () => {
    const { key } = await new ApiKeys(s.orm).create('eager');
    const statuses = await Promise.all(Array.from({ length: 30 }, () => s.http('/v1/agents', { key })));
    const limited = statuses.filter((r) => r.status === 429);
    expect(statuses.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(10);
    expect(limited.length).toBeGreaterThan(0);
    const body = await limited[0]!.json();
    expect(body.error).toMatchObject({ code: 'rate_limited', retryable: true, details: { limit: 'key' } });
    expect(body.error.retry_after_seconds).toBeGreaterThanOrEqual(1);
    expect(limited[0]!.headers.get('retry-after')).toBe(String(body.error.retry_after_seconds));
  });

  it('is RESOURCE_EXHAUSTED over gRPC', async () => {
    const { key } = await new ApiKeys(s.orm).create('eager-grpc');
    const calls = Array.from({ length: 30 }, () => failure(unary(s.clients.agents.listAgents.bind(s.clients.agents), {}, withKey(key))).catch(() => null));
    const errors = (await Promise.all(calls)).filter(Boolean);
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.every((e) => e!.code === 8)).toBe(true);
  });
});

describe('per tenant', () => {
  it('refuses a run past the runs it may have going, and takes one once a run ends', async () => {
    const held = await liveRun(s, agent, { agentId: 'busy' });
    const ws = await new WsClient(s.url).open();
    ws.send({ type: 'hello', api_key: s.key, user_id: 'u2' });
    await ws.next('hello_ack');
    ws.send({ type: 'agent_invoke', session_id: 'sess_second', agent_id: 'busy', message: { role: 'user', content: 'hi' } });
    expect(await ws.next('error')).toMatchObject({ code: 'rate_limited', retryable: true });
    held.release();
    await held.ws.next('done');
    agent.behave(async (_inv, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('event: done\ndata: {}\n\n');
    });
    ws.send({ type: 'agent_invoke', session_id: 'sess_second', agent_id: 'busy', message: { role: 'user', content: 'again' } });
    expect((await ws.next('done')).session_id).toBe('sess_second');
    ws.close();
    held.ws.close();
  });
});

describe('bad credentials', () => {
  it('from one address get 429 once the flood passes the limit', async () => {
    const answers = [];
    for (let i = 0; i < 40; i++) answers.push(await s.http('/v1/agents', { key: `abc_wrong_${i}` }));
    const statuses = answers.map((r) => r.status);
    expect(statuses.slice(0, 20)).toEqual(Array(20).fill(401));
    expect(statuses.slice(20)).toEqual(Array(20).fill(429));
    const body = await answers.at(-1)!.json();
    expect(body.error).toMatchObject({ code: 'rate_limited', retryable: true });
    expect(body.error.retry_after_seconds).toBeGreaterThan(0);
    // A good key from that address waits too: the address is what floods.
    expect((await s.http('/v1/agents')).status).toBe(429);
  });
});

describe('behind a trusted proxy', () => {
  it('limits each forwarded client, not the proxy', async () => {
    const proxied = await startGateway({ coreAddr: s.core.address, host: '127.0.0.1', port: 0, logger: testLogger(), trustedProxies: ['127.0.0.1'], authFailuresPerMinute: 5 });
    try {
      const from = (client: string, key: string) => fetch(`${proxied.url}/v1/agents`, { headers: { authorization: `Bearer ${key}`, 'x-forwarded-for': client } });
      const statuses = [];
      for (let i = 0; i < 7; i++) statuses.push((await from('10.0.0.1', `abc_wrong_${i}`)).status);
      expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429]);
      expect((await from('10.0.0.2', s.key)).status).toBe(200);
    } finally {
      await proxied.close();
    }
  });
});
