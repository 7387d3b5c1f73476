// Agent runs end to end over the gRPC Connect stream (seed 001 §4.1, §5, §6).
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RegisterAgentRequest } from '../../gen/abc/orchestrator/v1/agent.js';
import { readEvents } from '../../src/store/event-log.js';
import { startTestCore, type TestCore } from '../support/core.js';
import { countRuns } from '../support/db.js';
import { echo, sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { unary, withKey } from '../support/grpc.js';
import { ImClient } from '../support/im.js';

let t: TestCore;
let agent: FakeAgent;
let session = 0;
const nextSession = () => `sess_runs_${++session}_${Date.now()}`;

beforeAll(async () => {
  t = await startTestCore();
  agent = await startFakeAgent();
  await unary(t.clients.agents.registerAgent.bind(t.clients.agents),
    RegisterAgentRequest.fromPartial({ agentId: 'echo', name: 'Echo', endpoint: agent.url, capabilities: ['streaming'], auth: { type: 'bearer', token: 'agent-secret' } }),
    withKey(t.key));
});
afterAll(async () => {
  await agent.close();
  await t.close();
});
beforeEach(() => {
  agent.behave(echo);
});

async function connected(): Promise<ImClient> {
  const im = new ImClient(t.clients);
  im.hello(t.key);
  await im.next('helloAck');
  return im;
}

const events = (runId: string) => readEvents(t.orm.em.fork(), { runId }, '0', 10_000);

describe('an agent run over IM', () => {
  it('follows the full sequence of §4.1 and records everything', async () => {
    const im = await connected();
    const sessionId = nextSession();
    im.send({ $case: 'agentInvoke', value: { agentId: 'echo', message: { role: 'user', content: 'hello there' } } }, { requestId: 'req_1', sessionId });
    const done = await im.next('done');
    const started = im.of('runStarted')[0]!;
    expect(started).toMatchObject({ requestId: 'req_1', sessionId, value: { agentId: 'echo' } });
    const runId = started.runId;
    expect(im.of('delta').map((d) => d.value.text).join('')).toBe('echo: hello there');
    expect(done.frame).toMatchObject({ value: { finalMessage: 'echo: hello there', usage: { promptTokens: 3, completionTokens: 3, totalTokens: 6 } } });
    if (done.frame?.$case === 'done') expect(done.frame.value.usage!.durationMs).toBeGreaterThanOrEqual(0);
    // Frames from the log carry increasing cursors.
    const cursors = im.frames.filter((f) => f.cursor).map((f) => BigInt(f.cursor));
    expect(cursors).toEqual([...cursors].sort((a, b) => (a < b ? -1 : 1)));

    // What the agent received (§6.1).
    const inv = agent.invocations.at(-1)!;
    expect(inv.headers).toMatchObject({
      'x-session-id': sessionId,
      'x-run-id': runId,
      'x-platform-base-url': 'http://abc.test',
      authorization: 'Bearer agent-secret',
    });
    // Sampled as its caller asked; ABC exports nothing here and started this trace itself.
    expect(inv.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    expect(inv.headers['x-abc-run-token']).toMatch(/^abcrun_/);
    expect(inv.body).toMatchObject({ agent_id: 'echo', session_id: sessionId, run_id: runId, input_message: { role: 'user', content: 'hello there' } });
    expect(inv.body.messages).toEqual([{ role: 'user', content: 'hello there' }]);
    expect(inv.body.context).toMatchObject({ user_id: 'u1' });

    // The log: the §9 events in order, seq gap-free from 1. The agent's three deltas may be stored as fewer
    // (those that queue behind a commit are joined), with the same text.
    const log = await events(runId);
    const deltas = log.filter((e) => e.type === 'agent_stream_delta');
    expect(deltas.map((e) => e.payload.text).join('')).toBe('echo: hello there');
    expect(log.map((e) => e.type)).toEqual(['user_input', 'run_started', 'agent_invoke_started', ...deltas.map(() => 'agent_stream_delta'), 'agent_invoke_done', 'run_done']);
    expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i + 1));
    expect(log.filter((e) => e.type !== 'agent_stream_delta' && e.type !== 'agent_invoke_started').map(({ type, payload }) => ({ type, payload }))).toEqual([
      { type: 'user_input', payload: { message: { role: 'user', content: 'hello there' }, request_id: 'req_1' } },
      { type: 'run_started', payload: { agent_id: 'echo', request_id: 'req_1', trace_id: expect.stringMatching(/^[0-9a-f]{32}$/), parent_run_id: null } },
      { type: 'agent_invoke_done', payload: { agent_id: 'echo', usage: { prompt_tokens: 3, completion_tokens: 3 } } },
      { type: 'run_done', payload: { usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6, duration_ms: expect.any(Number) }, final_message: 'echo: hello there' } },
    ]);
    // The rows its start and its end wrote: the session, the run through CREATED → RUNNING → DONE, both messages.
    const em = t.orm.em.fork();
    expect(await em.execute('SELECT user_id, tenant_id, event_head FROM sessions WHERE session_id = ?', [sessionId])).toEqual([{ user_id: 'u1', tenant_id: 'default', event_head: String(log.length) }]);
    expect(await em.execute('SELECT status, version, last_seq, user_id, tenant_id, request_id, token_hash IS NOT NULL AS token, lease_owner IS NOT NULL AS leased, ended_at >= started_at AS ended, error FROM runs WHERE run_id = ?', [runId])).toEqual([
      { status: 'DONE', version: 3, last_seq: log.length, user_id: 'u1', tenant_id: 'default', request_id: 'req_1', token: true, leased: true, ended: true, error: null },
    ]);
    expect(await em.execute('SELECT role, content, metadata FROM messages WHERE run_id = ? ORDER BY created_at', [runId])).toEqual([
      { role: 'user', content: 'hello there', metadata: null },
      { role: 'assistant', content: 'echo: hello there', metadata: null },
    ]);
    const run = await unary(t.clients.runs.getRun.bind(t.clients.runs), { runId }, withKey(t.key));
    expect(run.run).toMatchObject({ status: 'RUN_STATUS_DONE', sessionId, rootAgentId: 'echo', requestId: 'req_1' });
    expect(run.run!.traceId).toBe(inv.headers.traceparent!.toString().split('-')[1]);
    im.close();
  });

  it('sends the frames that are ready together in one message to a connection that asked, in the same order', async () => {
    // Forty states and deltas in one write: they reach ABC, commit and go out together (a state keeps the deltas apart).
    agent.behave((_inv, res) => {
      sse(res, 'delta', { text: '' });
      res.write(Array.from({ length: 40 }, (_, i) => `event: state\ndata: {"state":"s${i}"}\n\nevent: delta\ndata: ${JSON.stringify({ text: ` w${i}` })}\n\n`).join(''));
      sse(res, 'done', { usage: {}, final_message: 'done' });
      res.end();
    });
    const frames = async (batchFrames: boolean) => {
      const im = new ImClient(t.clients);
      im.hello(t.key, 'u1', batchFrames);
      await im.next('helloAck');
      im.send({ $case: 'agentInvoke', value: { agentId: 'echo', message: { role: 'user', content: 'go' } } }, { sessionId: nextSession() });
      await im.next('done');
      im.close();
      return im;
    };
    const batched = await frames(true);
    const single = await frames(false);
    const shape = (im: ImClient) => im.frames.map((f) => (f.frame?.$case === 'delta' ? f.frame.value.text : f.frame?.$case === 'state' ? f.frame.value.state : f.frame?.$case));
    expect(shape(batched)).toEqual(shape(single));
    expect(batched.of('delta').map((d) => d.value.text).join('')).toBe(Array.from({ length: 40 }, (_, i) => ` w${i}`).join(''));
    // One message per frame, unless the connection asked; then a batch never nests.
    expect(single.messages).toHaveLength(single.frames.length);
    expect(single.messages.some((m) => m.frame?.$case === 'batch')).toBe(false);
    expect(batched.messages.length).toBeLessThan(batched.frames.length);
    expect(batched.frames.some((f) => f.frame?.$case === 'batch')).toBe(false);
  });

  it('ends the call with OK as soon as its client half-closes it', async () => {
    const im = await connected();
    im.send({ $case: 'agentInvoke', value: { agentId: 'echo', message: { role: 'user', content: 'bye' } } }, { sessionId: nextSession() });
    await im.next('done');
    // Not cancelled later: the call's requests are read without destroying the call, so it can still send its status.
    expect(await im.halfClose()).toMatchObject({ code: 0, details: 'OK' });
  });

  it('sends the transcript from the database on the next turn', async () => {
    const im = await connected();
    const sessionId = nextSession();
    im.send({ $case: 'agentInvoke', value: { agentId: 'echo', message: { role: 'user', content: 'one' } } }, { sessionId, requestId: 'a' });
    await im.next('done');
    const mark = im.frames.length;
    im.send({ $case: 'agentInvoke', value: { agentId: 'echo', message: { role: 'user', content: 'two' } } }, { sessionId, requestId: 'b' });
    await im.next('done', mark);
    expect(agent.invocations.at(-1)!.body.messages).toEqual([
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'echo: one' },
      { role: 'user', content: 'two' },
    ]);
    const page = await unary(t.clients.sessions.listMessages.bind(t.clients.sessions), { sessionId, limit: 2, before: '' }, withKey(t.key));
    expect(page.messages.map((m) => m.content)).toEqual(['two', 'echo: two']);
    expect(page.hasMore).toBe(true);
    const older = await unary(t.clients.sessions.listMessages.bind(t.clients.sessions), { sessionId, limit: 50, before: page.messages[0]!.messageId }, withKey(t.key));
    expect(older.messages.map((m) => m.content)).toEqual(['one', 'echo: one']);
    expect(older.hasMore).toBe(false);
    im.close();
  });

  it('pages a transcript whose messages share a millisecond, losing none', async () => {
    const sessionId = nextSession();
    const em = t.orm.em.fork();
    await em.execute("INSERT INTO sessions (session_id, user_id, tenant_id) VALUES (?, 'u', 'default')", [sessionId]);
    await em.execute(
      `INSERT INTO messages (message_id, session_id, role, content, created_at)
       SELECT 'msg_' || ? || '_' || g, ?, 'user', 'm' || g, timestamptz '2026-11-27 12:00:00.123' + g * interval '100 microseconds' FROM generate_series(1, 5) g`,
      [sessionId, sessionId],
    );
    const pages: string[][] = [];
    let before = '';
    for (;;) {
      const page = await unary(t.clients.sessions.listMessages.bind(t.clients.sessions), { sessionId, limit: 2, before }, withKey(t.key));
      pages.unshift(page.messages.map((m) => m.content));
      if (!page.hasMore) break;
      before = page.messages[0]!.messageId;
    }
    expect(pages).toEqual([['m1'], ['m2', 'm3'], ['m4', 'm5']]);
  });

  it('returns the same run for a repeated request_id and starts no second one', async () => {
    const im = await connected();
    const sessionId = nextSession();
    const before = agent.invocations.length;
    im.send({ $case: 'agentInvoke', value: { agentId: 'echo', message: { role: 'user', content: 'once' } } }, { sessionId, requestId: 'dup' });
    await im.next('done');
    im.send({ $case: 'agentInvoke', value: { agentId: 'echo', message: { role: 'user', content: 'once' } } }, { sessionId, requestId: 'dup' });
    await im.until((f) => f.filter((x) => x.frame?.$case === 'runStarted').length === 2);
    const [first, second] = im.of('runStarted');
    expect(second!.runId).toBe(first!.runId);
    expect(second!.requestId).toBe('dup');
    expect(agent.invocations.length - before).toBe(1);
    expect(await countRuns(t.orm, sessionId)).toBe(1);
    im.close();
  });

  it('cancels in the middle of a stream: CANCELLED, run_cancelled, and the agent request aborted', async () => {
    let release!: () => void;
    const hold = new Promise<void>((resolve) => (release = resolve));
    agent.behave(async (inv, res) => {
      sse(res, 'delta', { text: 'first' });
      await Promise.race([hold, inv.closed]);
      sse(res, 'delta', { text: 'too late' });
      sse(res, 'done', { usage: {} });
      res.end();
    });
    const im = await connected();
    im.send({ $case: 'agentInvoke', value: { agentId: 'echo', message: { role: 'user', content: 'slow' } } }, { sessionId: nextSession() });
    const delta = await im.next('delta');
    im.send({ $case: 'cancelRun', value: {} }, { runId: delta.runId });
    const state = await im.next('state');
    expect(state.frame).toMatchObject({ value: { state: 'CANCELLED' } });
    await agent.invocations.at(-1)!.closed; // the HTTP request to the agent was aborted
    release();
    const run = await unary(t.clients.runs.getRun.bind(t.clients.runs), { runId: delta.runId }, withKey(t.key));
    expect(run.run!.status).toBe('RUN_STATUS_CANCELLED');
    await new Promise((r) => setTimeout(r, 100));
    const log = await events(delta.runId);
    expect(log.map((e) => e.type)).toEqual(['user_input', 'run_started', 'agent_invoke_started', 'agent_stream_delta', 'run_cancelled']);
    expect(im.of('delta').map((d) => d.value.text)).toEqual(['first']);
    im.close();
  });

  const faults: [string, (res: ServerResponse) => void, string][] = [
    ['an HTTP error status', (res) => res.writeHead(500).end('boom'), 'http_status'],
    ['malformed SSE', (res) => (sse(res, 'delta', { text: 'ok' }), res.write('event: delta\ndata: {not json\n\n'), res.end()), 'malformed_sse'],
    ['a stream that ends without done', (res) => (sse(res, 'delta', { text: 'partial' }), res.end()), 'no_done'],
    ['a connection reset', (res) => (sse(res, 'delta', { text: 'partial' }), setTimeout(() => res.socket?.destroy(), 20)), 'connection'],
    ['a timeout', (res) => void sse(res, 'delta', { text: 'then silence' }), 'timeout'],
  ];
  it.each(faults)('fails the run with agent_error on %s', async (_name, fault, reason) => {
    agent.behave((_inv, res) => fault(res));
    const im = await connected();
    im.send({ $case: 'agentInvoke', value: { agentId: 'echo', message: { role: 'user', content: 'x' } } }, { sessionId: nextSession() });
    const error = await im.next('error');
    expect(error.frame).toMatchObject({ value: { code: 'agent_error' } });
    const run = await unary(t.clients.runs.getRun.bind(t.clients.runs), { runId: error.runId }, withKey(t.key));
    expect(run.run).toMatchObject({ status: 'RUN_STATUS_FAILED', error: { code: 'agent_error' } });
    expect(run.run!.error!.details).toMatchObject({ reason });
    const log = await events(error.runId);
    expect(log.at(-1)).toMatchObject({ type: 'run_failed', payload: { error: { code: 'agent_error', reason } } });
    im.close();
  });

  it('times out an agent that never answers, after its retries', async () => {
    let calls = 0;
    agent.behave(() => void calls++);
    const im = await connected();
    im.send({ $case: 'agentInvoke', value: { agentId: 'echo', message: { role: 'user', content: 'x' } } }, { sessionId: nextSession() });
    // Each of the three attempts waits out the idle timeout (2 s) for the response's headers.
    await im.until((frames) => frames.some((f) => f.frame?.$case === 'error'), 30_000);
    const error = im.frames.find((f) => f.frame?.$case === 'error')!;
    const run = await unary(t.clients.runs.getRun.bind(t.clients.runs), { runId: error.runId }, withKey(t.key));
    expect(run.run).toMatchObject({ status: 'RUN_STATUS_FAILED', error: { code: 'agent_error', message: 'agent did not answer within 2000 ms' } });
    expect(run.run!.error!.details).toMatchObject({ reason: 'timeout' });
    expect(calls).toBe(3);
    im.close();
  });

  it('retries a failure before the first byte, so the run still succeeds', async () => {
    let calls = 0;
    agent.behave((inv, res) => (++calls === 1 ? void res.writeHead(503).end() : echo(inv, res, undefined as never)));
    const im = await connected();
    im.send({ $case: 'agentInvoke', value: { agentId: 'echo', message: { role: 'user', content: 'again' } } }, { sessionId: nextSession() });
    const done = await im.next('done');
    expect(calls).toBe(2);
    expect((await events(done.runId)).map((e) => e.type)).toContain('agent_invoke_retry');
    expect(im.of('delta').map((d) => d.value.text).join('')).toBe('echo: again');
    im.close();
  });
});

describe('IM protocol errors', () => {
  it('answers a bad API key with an error frame and closes', async () => {
    const im = new ImClient(t.clients);
    im.hello('abc_wrong-key-wrong-key-wrong');
    const error = await im.next('error');
    expect(error.frame).toMatchObject({ value: { code: 'unauthenticated', field: 'api_key' } });
    await im.until(() => im.ended);
  });

  it('refuses frames before hello', async () => {
    const im = new ImClient(t.clients);
    im.send({ $case: 'agentInvoke', value: { agentId: 'echo', message: { role: 'user', content: 'x' } } });
    expect((await im.next('error')).frame).toMatchObject({ value: { code: 'unauthenticated' } });
    await im.until(() => im.ended);
  });

  it('answers a malformed frame with invalid_request naming the field, and stays usable', async () => {
    const im = await connected();
    im.send(undefined as never, { requestId: 'bad' });
    expect((await im.next('error')).frame).toMatchObject({ value: { code: 'invalid_request', field: 'type' } });
    im.send({ $case: 'agentInvoke', value: { agentId: 'echo', message: { role: 'user', content: '' } } }, { requestId: 'empty', sessionId: nextSession() });
    await im.until((f) => f.filter((x) => x.frame?.$case === 'error').length === 2);
    expect(im.of('error')[1]).toMatchObject({ requestId: 'empty', value: { code: 'invalid_request', field: 'message.content' } });
    im.send({ $case: 'agentInvoke', value: { agentId: 'echo', message: { role: 'user', content: 'still here' } } }, { sessionId: nextSession() });
    expect(im.of('delta').length).toBe(0);
    await im.next('done');
    im.close();
  });

  it('refuses an unknown agent with agent_error and creates no run', async () => {
    const im = await connected();
    const sessionId = nextSession();
    im.send({ $case: 'agentInvoke', value: { agentId: 'nobody', message: { role: 'user', content: 'x' } } }, { sessionId, requestId: 'r' });
    const error = await im.next('error');
    expect(error).toMatchObject({ requestId: 'r', frame: { value: { code: 'agent_error', message: 'agent nobody is not registered' } } });
    expect(await countRuns(t.orm, sessionId)).toBe(0);
    im.close();
  });
});
