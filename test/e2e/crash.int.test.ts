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

  it('hands 100 runs of a resumable agent, killed mid-stream, to another core: each ends DONE and each client has its whole text once', async () => {
    const RUNS = 100;
    const WORDS = 30;
    const words = (n: string) => Array.from({ length: WORDS }, (_, i) => `${n}.${i} `);
    const resumes: Record<string, unknown>[] = [];
    const steady = await startFakeAgent(async (inv, res) => {
      // A function of the transcript. The first invocation streams a few words and then holds
      // (its core is killed mid-stream). On the resume, even runs stream again from the start
      // (ABC drops what was delivered); odd runs continue after context.resume.streamed_text.
      const n = inv.body.input_message.content;
      const resume = inv.body.context.resume as { streamed_text: string } | undefined;
      if (resume) resumes.push(resume);
      let out = words(n);
      if (resume && Number(n) % 2 === 1) out = out.slice(resume.streamed_text.split(' ').filter(Boolean).length);
      for (const [i, word] of out.entries()) {
        if (!resume && i === 5) return void (await inv.closed);
        sse(res, 'delta', { text: word });
        await new Promise((r) => setTimeout(r, 10));
      }
      sse(res, 'done', { usage: { completion_tokens: WORDS } });
      res.end();
    });
    const first = await childCore();
    await unary(first.clients.agents.registerAgent.bind(first.clients.agents), RegisterAgentRequest.fromPartial({ agentId: 'steady', name: 'Steady', endpoint: steady.url, resumable: true }), withKey(KEY));
    const stamp = Date.now();
    const clients = await Promise.all(Array.from({ length: RUNS }, async (_, i) => {
      const im = new ImClient(first.clients);
      im.hello(KEY);
      await im.next('helloAck');
      const sessionId = `sess_takeover_${stamp}_${i}`;
      im.send({ $case: 'agentInvoke', value: { agentId: 'steady', message: { role: 'user', content: String(i) } } }, { sessionId });
      return { im, sessionId, n: String(i), runId: (await im.next('runStarted')).runId };
    }));
    // Every run is mid-stream: its client has some of its words, none has all.
    await Promise.all(clients.map(({ im }) => im.until(() => im.text().split(' ').length > 3, 30_000)));
    first.child.kill('SIGKILL');
    // What each client had when its core died, and the cursor it resumes from.
    const before = clients.map(({ im }) => {
      im.close();
      return { text: im.text(), cursor: im.of('delta').at(-1)!.cursor };
    });
    closeCore(first.clients);
    // The kill came mid-stream for every run: each client has some of its text, none all of it.
    for (const [i, b] of before.entries()) expect(b.text.length > 0 && b.text.length < words(String(i)).join('').length, `run ${i}: ${b.text}`).toBe(true);

    const second = await recoverer();
    const after = await Promise.all(clients.map(async ({ sessionId, runId }, i) => {
      const im = new ImClient(second.clients);
      im.hello(KEY);
      await im.next('helloAck');
      im.send({ $case: 'resume', value: { cursor: before[i]!.cursor } }, { sessionId });
      await im.until((f) => f.some((x) => x.frame?.$case === 'done' && x.runId === runId), 30_000);
      im.close();
      return im.text();
    }));
    for (const [i, { n, runId }] of clients.entries()) {
      expect(before[i]!.text + after[i]!, `run ${n}`).toBe(words(n).join(''));
      expect((await status(second.clients, runId)).status).toBe('RUN_STATUS_DONE');
    }
    const types = (await readEvents(store.orm.em.fork(), { runId: clients[0]!.runId }, '0', 500)).map((e) => e.type);
    expect(types).toContain('run_taken_over');
    expect(types.at(-1)).toBe('run_done');
    // Each takeover told its agent what its client had.
    expect(resumes).toHaveLength(RUNS);
    expect(resumes.every((r) => r.reason === 'executor_lost' && typeof r.last_cursor === 'string' && Array.isArray(r.tool_calls))).toBe(true);
    closeCore(second.clients);
    await second.core.close();
    await steady.close();
  }, 120_000);
});
