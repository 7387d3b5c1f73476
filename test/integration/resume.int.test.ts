// Nothing is lost: reconnect-and-resume, disconnected runs, isolation, replay paging.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RegisterAgentRequest } from '../../gen/abc/orchestrator/v1/agent.js';
import { startTestCore, type TestCore } from '../support/core.js';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { unary, withKey } from '../support/grpc.js';
import { ImClient } from '../support/im.js';

let t: TestCore;
let counter: FakeAgent;
let gate: { open: () => void; opened: Promise<void> };

/** Streams `n` numbered deltas; waits on the gate after the first 100. */
const counting = (n: number) => async (_inv: unknown, res: import('node:http').ServerResponse) => {
  for (let i = 0; i < n; i++) {
    if (i === 100) await gate.opened;
    if (!sse(res, 'delta', { text: `${i};` })) await new Promise((r) => res.once('drain', r));
  }
  sse(res, 'done', { usage: { completion_tokens: n } });
  res.end();
};

const newGate = () => {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
};

beforeAll(async () => {
  t = await startTestCore();
  counter = await startFakeAgent();
  await unary(t.clients.agents.registerAgent.bind(t.clients.agents), RegisterAgentRequest.fromPartial({ agentId: 'counter', name: 'Counter', endpoint: counter.url }), withKey(t.key));
});
afterAll(async () => {
  await counter.close();
  await t.close();
});

async function connected(userId = 'u1'): Promise<ImClient> {
  const im = new ImClient(t.clients);
  im.hello(t.key, userId);
  await im.next('helloAck');
  return im;
}

/** `count` numbered deltas as the counting agent writes them, joined. */
const numbered = (count: number, from = 0) => Array.from({ length: count }, (_, i) => `${from + i};`).join('');
/** How many of the counting agent's deltas `text` carries. */
const deltasIn = (text: string) => text.split(';').length - 1;

describe('reconnect and resume', () => {
  it('replays every missed frame of a 1,000-delta stream in order, with no gap or duplicate', async () => {
    gate = newGate();
    counter.behave(counting(1000));
    const sessionId = `sess_resume_${Date.now()}`;
    const first = await connected();
    first.send({ $case: 'agentInvoke', value: { agentId: 'counter', message: { role: 'user', content: 'count' } } }, { sessionId, requestId: 'count-1' });
    await first.until(() => deltasIn(first.text()) >= 50);
    first.close(); // the client drops; the run must go on
    const seen = first.frames.filter((f) => f.cursor);
    const lastCursor = seen.at(-1)!.cursor;
    const seenText = seen.flatMap((f) => (f.frame?.$case === 'delta' ? [f.frame.value.text] : [])).join('');
    gate.open();

    const second = await connected();
    second.send({ $case: 'resume', value: { cursor: lastCursor } }, { sessionId });
    await second.next('done');
    expect(seenText + second.text()).toBe(numbered(1000));
    const cursors = [...seen, ...second.frames.filter((f) => f.cursor)].map((f) => BigInt(f.cursor));
    expect(new Set(cursors).size).toBe(cursors.length);
    second.close();
  });

  it('keeps a run going when its client disconnects; its frames wait in the log', async () => {
    gate = newGate();
    gate.open();
    counter.behave(counting(20));
    const sessionId = `sess_gone_${Date.now()}`;
    const im = await connected();
    im.send({ $case: 'agentInvoke', value: { agentId: 'counter', message: { role: 'user', content: 'go' } } }, { sessionId });
    const started = await im.next('runStarted');
    im.close();
    await expect
      .poll(async () => (await unary(t.clients.runs.getRun.bind(t.clients.runs), { runId: started.runId }, withKey(t.key))).run!.status, { timeout: 5000 })
      .toBe('RUN_STATUS_DONE');
    const later = await connected();
    later.send({ $case: 'resume', value: { cursor: '' } }, { sessionId });
    await later.next('done');
    expect(later.text()).toBe(numbered(20));
    expect(later.of('runStarted')[0]!.runId).toBe(started.runId);
    later.close();
  });

  it('refuses to resume another user’s session', async () => {
    gate = newGate();
    gate.open();
    counter.behave(counting(1));
    const sessionId = `sess_mine_${Date.now()}`;
    const owner = await connected('alice');
    owner.send({ $case: 'agentInvoke', value: { agentId: 'counter', message: { role: 'user', content: 'x' } } }, { sessionId });
    await owner.next('done');
    const other = await connected('mallory');
    other.send({ $case: 'resume', value: { cursor: '' } }, { sessionId });
    expect((await other.next('error')).frame).toMatchObject({ value: { code: 'forbidden' } });
    expect(other.of('delta')).toEqual([]);
    owner.close();
    other.close();
  });
});

describe('isolation', () => {
  it('keeps two sessions running at once apart', async () => {
    counter.behave(async (inv, res) => {
      for (let i = 0; i < 30; i++) {
        sse(res, 'delta', { text: `${inv.body.input_message.content}-${i} ` });
        await new Promise((r) => setTimeout(r, 1));
      }
      sse(res, 'done', { usage: {} });
      res.end();
    });
    const [a, b] = await Promise.all([connected('ua'), connected('ub')]);
    a.send({ $case: 'agentInvoke', value: { agentId: 'counter', message: { role: 'user', content: 'A' } } }, { sessionId: `sess_a_${Date.now()}` });
    b.send({ $case: 'agentInvoke', value: { agentId: 'counter', message: { role: 'user', content: 'B' } } }, { sessionId: `sess_b_${Date.now()}` });
    await Promise.all([a.next('done'), b.next('done')]);
    expect(a.text()).toBe(Array.from({ length: 30 }, (_, i) => `A-${i} `).join(''));
    expect(b.text()).toBe(Array.from({ length: 30 }, (_, i) => `B-${i} `).join(''));
    expect(new Set(a.frames.map((f) => f.sessionId).filter(Boolean)).size).toBe(1);
    a.close();
    b.close();
  });
});

describe('replay', () => {
  it('pages through a run with types and a cursor', async () => {
    const im = await connected();
    // Each delta once the one before has reached the client: five deltas stored as five.
    counter.behave(async (_inv, res) => {
      for (let i = 0; i < 5; i++) {
        sse(res, 'delta', { text: `${i};` });
        await im.until(() => deltasIn(im.text()) > i);
      }
      sse(res, 'done', { usage: {} });
      res.end();
    });
    im.send({ $case: 'agentInvoke', value: { agentId: 'counter', message: { role: 'user', content: 'x' } } }, { sessionId: `sess_replay_${Date.now()}` });
    const done = await im.next('done');
    im.close();
    const list = (cursor: string, types: string[], limit: number) =>
      unary(t.clients.observer.listEvents.bind(t.clients.observer), { runId: done.runId, sessionId: '', afterTs: 0, types, excludeTypes: [], limit, cursor }, withKey(t.key));

    const all = await list('', [], 100);
    expect(all.events.map((e) => e.type)).toEqual([
      'user_input', 'run_started', 'agent_invoke_started', ...Array(5).fill('agent_stream_delta'), 'agent_invoke_done', 'run_done',
    ]);
    expect(all.hasMore).toBe(false);

    const pages: string[][] = [];
    let cursor = '';
    for (;;) {
      const page = await list(cursor, ['agent_stream_delta'], 2);
      pages.push(page.events.map((e) => String(e.payload!.text)));
      if (!page.hasMore) break;
      cursor = page.nextCursor;
    }
    expect(pages).toEqual([['0;', '1;'], ['2;', '3;'], ['4;']]);

    const afterTs = await list('', [], 100).then((r) => r.events[3]!.ts);
    const later = await unary(t.clients.observer.listEvents.bind(t.clients.observer), { runId: done.runId, sessionId: '', afterTs: afterTs - 1, types: ['run_done'], excludeTypes: [], limit: 10, cursor: '' }, withKey(t.key));
    expect(later.events.map((e) => e.type)).toEqual(['run_done']);
  });
});
