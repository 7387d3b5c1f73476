// The LISTEN connection dies mid-stream: watchers miss nothing once the bus reconnects.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RegisterAgentRequest } from '../../gen/abc/orchestrator/v1/agent.js';
import { startTestCore, type TestCore } from '../support/core.js';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { unary, withKey } from '../support/grpc.js';
import { ImClient } from '../support/im.js';

let t: TestCore;
let agent: FakeAgent;

beforeAll(async () => {
  t = await startTestCore();
  agent = await startFakeAgent();
  await unary(t.clients.agents.registerAgent.bind(t.clients.agents), RegisterAgentRequest.fromPartial({ agentId: 'steady', name: 'Steady', endpoint: agent.url }), withKey(t.key));
});
afterAll(async () => {
  await agent.close();
  await t.close();
});

describe('the LISTEN connection', () => {
  it('can die mid-stream without a frame being lost or repeated', async () => {
    agent.behave(async (_inv, res) => {
      for (let i = 0; i < 200; i++) {
        sse(res, 'delta', { text: `${i} ` });
        await new Promise((r) => setTimeout(r, 2));
      }
      sse(res, 'done', { usage: {} });
      res.end();
    });
    const im = new ImClient(t.clients);
    im.hello(t.key);
    await im.next('helloAck');
    im.send({ $case: 'agentInvoke', value: { agentId: 'steady', message: { role: 'user', content: 'go' } } }, { sessionId: `sess_listen_${Date.now()}` });
    await im.until(() => im.text().split(' ').length > 20);

    // Kill every backend that is LISTENing (the bus), as a network fault or a DB failover would.
    const killed = await t.orm.em.fork().execute<{ ok: boolean }[]>(
      "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'abc-listener' AND pid <> pg_backend_pid()",
    );
    expect(killed.length).toBeGreaterThan(0);

    await im.next('done');
    expect(im.text()).toBe(Array.from({ length: 200 }, (_, i) => `${i} `).join(''));
    im.close();
  });
});
