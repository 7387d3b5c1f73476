// Two cores on one database: events and cancels cross processes through PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RegisterAgentRequest } from '../../gen/abc/orchestrator/v1/agent.js';
import { closeCore, connectCore, type CoreClients } from '../../gateway/core-client.js';
import { startCore, type Core } from '../../src/main/core.js';
import { FAST_RETRY, startTestCore, type TestCore, coreOptions } from '../support/core.js';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { unary, withKey } from '../support/grpc.js';
import { ImClient } from '../support/im.js';

let a: TestCore;
let b: Core;
let bClients: CoreClients;
let agent: FakeAgent;

beforeAll(async () => {
  a = await startTestCore();
  b = await startCore(coreOptions(a.orm, { retry: FAST_RETRY, drainTimeoutMs: 1000 }));
  bClients = connectCore(b.address);
  agent = await startFakeAgent();
  await unary(a.clients.agents.registerAgent.bind(a.clients.agents), RegisterAgentRequest.fromPartial({ agentId: 'slow', name: 'Slow', endpoint: agent.url }), withKey(a.key));
});
afterAll(async () => {
  await agent.close();
  closeCore(bClients);
  await b.close();
  await a.close();
});

describe('two core replicas', () => {
  it('deliver a run started on one core to a watcher on the other, and cancel across them', async () => {
    let sent = 0;
    agent.behave(async (inv, res) => {
      while (!res.destroyed) {
        sse(res, 'delta', { text: `${sent++};` });
        await Promise.race([new Promise((r) => setTimeout(r, 5)), inv.closed]);
      }
    });
    const onA = new ImClient(a.clients);
    onA.hello(a.key);
    await onA.next('helloAck');
    const sessionId = `sess_replicas_${Date.now()}`;
    onA.send({ $case: 'agentInvoke', value: { agentId: 'slow', message: { role: 'user', content: 'go' } } }, { sessionId });
    const started = await onA.next('runStarted');

    // A watcher on core B sees the run core A executes.
    const onB = new ImClient(bClients);
    onB.hello(a.key);
    await onB.next('helloAck');
    onB.send({ $case: 'resume', value: { cursor: '' } }, { sessionId });
    await onB.until(() => onB.text().split(';').length > 5);

    // A cancel arriving at core B aborts core A's call to the agent.
    onB.send({ $case: 'cancelRun', value: {} }, { runId: started.runId });
    await agent.invocations.at(-1)!.closed;
    expect((await onA.next('state')).frame).toMatchObject({ value: { state: 'CANCELLED' } });
    expect((await onB.next('state')).frame).toMatchObject({ value: { state: 'CANCELLED' } });
    const run = await unary(bClients.runs.getRun.bind(bClients.runs), { runId: started.runId }, withKey(a.key));
    expect(run.run!.status).toBe('RUN_STATUS_CANCELLED');
    // Both replicas delivered the same deltas.
    expect(onB.text()).toBe(onA.text());
    onA.close();
    onB.close();
  });
});
