// A core that dies mid-run loses nothing: another core recovers the run from the database.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RegisterAgentRequest } from '../../gen/abc/orchestrator/v1/agent.js';
import { closeCore, connectCore, type CoreClients } from '../../gateway/core-client.js';
import { startCore, type Core } from '../../src/main/core.js';
import { readEvents } from '../../src/store/event-log.js';
import { FAST_RETRY, coreOptions } from '../support/core.js';
import { migratedOrm } from '../support/db.js';
import { echo, sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { unary, withKey } from '../support/grpc.js';
import { ImClient } from '../support/im.js';
import { startChildCore } from '../support/child-core.js';

const KEY = 'abc_crash_test_key_0123456789';
const LEASE_MS = 400;

let store: Awaited<ReturnType<typeof migratedOrm>>;
let agent: FakeAgent;

beforeAll(async () => {
  store = await migratedOrm();
  agent = await startFakeAgent();
});
afterAll(async () => {
  await agent.close();
  await store.close();
});

const childCore = () => startChildCore({ DATABASE_URL: store.db.url, ABC_API_KEYS: KEY, RUN_LEASE_MS: String(LEASE_MS) });

async function startRunOn(clients: CoreClients, sessionId: string): Promise<{ im: ImClient; runId: string }> {
  const im = new ImClient(clients);
  im.hello(KEY);
  await im.next('helloAck');
  im.send({ $case: 'agentInvoke', value: { agentId: 'crashy', message: { role: 'user', content: 'survive' } } }, { sessionId });
  return { im, runId: (await im.next('runStarted')).runId };
}

async function recoverer(): Promise<{ core: Core; clients: CoreClients }> {
  const core = await startCore(coreOptions(store.orm, { retry: FAST_RETRY, runLeaseMs: LEASE_MS, drainTimeoutMs: 500 }));
  return { core, clients: connectCore(core.address) };
}

const status = (clients: CoreClients, runId: string) =>
  unary(clients.runs.getRun.bind(clients.runs), { runId }, withKey(KEY)).then((r) => r.run!);

describe('a core killed mid-run', () => {
  it('is replaced: a run whose agent had sent nothing is invoked again and completes', async () => {
    const first = await childCore();
    await unary(first.clients.agents.registerAgent.bind(first.clients.agents), RegisterAgentRequest.fromPartial({ agentId: 'crashy', name: 'Crashy', endpoint: agent.url }), withKey(KEY));
    let calls = 0;
    agent.behave(async (inv, res, req) => {
      if (++calls === 1) return void (await inv.closed); // the first call hangs before its first byte
      return echo(inv, res, req);
    });
    const { im, runId } = await startRunOn(first.clients, `sess_crash_quiet_${Date.now()}`);
    await expect.poll(() => calls).toBe(1);
    first.child.kill('SIGKILL');
    im.close();
    closeCore(first.clients);

    const second = await recoverer();
    await expect.poll(async () => (await status(second.clients, runId)).status, { timeout: 10_000, interval: 100 }).toBe('RUN_STATUS_DONE');
    const types = (await readEvents(store.orm.em.fork(), { runId }, '0', 100)).map((e) => e.type);
    expect(types).toContain('agent_invoke_retry');
    expect(types.at(-1)).toBe('run_done');
    expect(calls).toBe(2);
    closeCore(second.clients);
    await second.core.close();
  });

  it('fails a run that had streamed, rather than replaying output the client already saw', async () => {
    const first = await childCore();
    agent.behave(async (inv, res) => {
      sse(res, 'delta', { text: 'half an ans' });
      await inv.closed;
    });
    const { im, runId } = await startRunOn(first.clients, `sess_crash_loud_${Date.now()}`);
    await im.next('delta');
    first.child.kill('SIGKILL');
    im.close();
    closeCore(first.clients);

    const second = await recoverer();
    await expect.poll(async () => (await status(second.clients, runId)).status, { timeout: 10_000, interval: 100 }).toBe('RUN_STATUS_FAILED');
    const run = await status(second.clients, runId);
    expect(run.error).toMatchObject({ code: 'internal_error', retryable: true });
    expect(run.error!.details).toMatchObject({ reason: 'executor_lost' });
    const deltas = (await readEvents(store.orm.em.fork(), { runId, types: ['agent_stream_delta'] }, '0', 100)).map((e) => e.payload.text);
    expect(deltas).toEqual(['half an ans']);
    closeCore(second.clients);
    await second.core.close();
  });
});
