// The HTTP surface through the gateway: registry, replay, SSE resume, transcripts, context, errors.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';
import { liveRun } from '../support/live-run.js';
import { readSse } from '../support/sse.js';

let s: TestStack;
let agent: FakeAgent;
let runId: string;
const SESSION = 'sess_http_1';

beforeAll(async () => {
  s = await startTestStack();
  agent = await startFakeAgent(async (_inv, res) => {
    // A state after each delta: the deltas are stored one each (deltas that queue up together are joined).
    for (let i = 0; i < 10; i++) sse(res, 'delta', { text: `w${i} ` }), sse(res, 'state', { state: 'writing', detail: { word: i } });
    sse(res, 'state', { state: 'thinking', detail: { step: 'summing up' } });
    sse(res, 'done', { usage: { tokens: 10 }, final_message: 'all done' });
    res.end();
  });
  await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'writer', name: 'Writer', endpoint: agent.url, auth: { type: 'bearer', token: 'tok-123' } } });
  const ws = await new WsClient(s.url).open();
  ws.send({ type: 'hello', user_id: 'u1', api_key: s.key });
  ws.send({ type: 'agent_invoke', session_id: SESSION, agent_id: 'writer', message: { role: 'user', content: 'write' } });
  runId = (await ws.next('done')).run_id;
  ws.close();
});
afterAll(async () => {
  await agent.close();
  await s.close();
});

/** Reads SSE events from a response until `count` events arrived, then aborts. */
describe('agents over HTTP', () => {
  it('lists agents without their tokens', async () => {
    const res = await s.http('/v1/agents');
    const body = await res.json();
    expect(body.agents).toContainEqual(expect.objectContaining({ agent_id: 'writer', name: 'Writer', status: 'healthy', last_heartbeat_at: expect.any(Number) }));
    expect(JSON.stringify(body)).not.toContain('tok-123');
  });

  it('rejects a bad body with 400 invalid_request naming the field', async () => {
    const res = await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'x', name: 'X' } });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: 'invalid_request', category: 'VALIDATION', retryable: false, details: { field: 'body.endpoint' } });
  });

  it('answers 401 with the seed error shape without an API key', async () => {
    const res = await s.http('/v1/agents', { key: null });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: { code: 'unauthenticated', category: 'AUTH', message: 'a valid API key is required', retryable: false, trace_id: expect.stringMatching(/^[0-9a-f]{32}$/) } });
  });

  it('refuses to cancel a finished run: the illegal transition is an error, not a no-op', async () => {
    const res = await s.http(`/v1/runs/${runId}:cancel`, { method: 'POST', json: { reason: 'too late' } });
    expect(res.status).toBe(412);
    expect((await res.json()).error).toMatchObject({ code: 'illegal_transition', details: { from: 'DONE', trigger: 'cancel' } });
    expect((await (await s.http(`/v1/runs/${runId}`)).json()).run.status).toBe('DONE');
  });

  it('answers 404 for an unknown run', async () => {
    const res = await s.http('/v1/runs/run_missing');
    expect(res.status).toBe(404);
    expect((await res.json()).error.code).toBe('not_found');
  });
});

describe('replay and live events', () => {
  it('replays with types, limit and cursor (§9.3)', async () => {
    const first = await (await s.http(`/v1/runs/${runId}/events?types=agent_stream_delta&limit=4`)).json();
    expect(first.events.map((e: { payload: { text: string } }) => e.payload.text)).toEqual(['w0 ', 'w1 ', 'w2 ', 'w3 ']);
    expect(first.has_more).toBe(true);
    const rest = await (await s.http(`/v1/runs/${runId}/events?types=agent_stream_delta,agent_state&limit=100&cursor=${first.next_cursor}`)).json();
    expect(rest.events.map((e: { type: string }) => e.type)).toEqual(['agent_state', ...Array(6).fill(['agent_stream_delta', 'agent_state']).flat(), 'agent_state']);
    expect(rest.has_more).toBe(false);
    expect(rest.events[0]).toMatchObject({ run_id: runId, session_id: SESSION, seq: expect.any(Number), ts: expect.any(Number), event_id: expect.stringMatching(/^evt_/) });
  });

  it('answers an SSE request, or a replay, of an unknown run with 404, not an empty stream', async () => {
    for (const path of ['/v1/runs/run_missing/events/stream', '/v1/runs/run_missing/events']) {
      const res = await s.http(path);
      expect(res.status).toBe(404);
      expect((await res.json()).error).toMatchObject({ code: 'not_found', details: { run: 'run_missing' } });
    }
  });

  it('ends an SSE stream that has nothing to send: a resume after the end, a filter that matches nothing', async () => {
    const all = (await (await s.http(`/v1/runs/${runId}/events?limit=1000`)).json()).events;
    const resumed = await s.http(`/v1/runs/${runId}/events/stream`, { headers: { 'last-event-id': all.at(-1).cursor } });
    expect(resumed.status).toBe(200);
    expect(resumed.headers.get('content-type')).toBe('text/event-stream');
    expect(await resumed.text()).not.toContain('event:');
    const filtered = await s.http(`/v1/runs/${runId}/events/stream?types=no_such_type`);
    expect(filtered.status).toBe(200);
    expect(await filtered.text()).not.toContain('event:');
  });

  it('sends the headers of a live, caught-up SSE stream at once', async () => {
    const holder = await startFakeAgent();
    await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'holder', name: 'Holder', endpoint: holder.url } });
    const run = await liveRun(s, holder, { agentId: 'holder' });
    const all = (await (await s.http(`/v1/runs/${run.runId}/events?limit=1000`)).json()).events;
    const c = new AbortController();
    // Resolves on the headers: before the fix they came only with the next event.
    const res = await s.http(`/v1/runs/${run.runId}/events/stream`, { signal: c.signal, headers: { 'last-event-id': all.at(-1).cursor } });
    expect(res.status).toBe(200);
    run.release();
    const events = await readSse(res, 10, c);
    expect(events.at(-1)!.event).toBe('run_done');
    await holder.close();
  });

  it('rejects a bad cursor', async () => {
    const res = await s.http(`/v1/runs/${runId}/events?cursor=evt_abc`);
    expect(res.status).toBe(400);
    expect((await res.json()).error.details.field).toBe('querystring.cursor');
  });

  it('streams SSE with id: cursors, and Last-Event-ID resumes with no gap or repeat', async () => {
    const c1 = new AbortController();
    const res1 = await s.http(`/v1/runs/${runId}/events/stream`, { signal: c1.signal });
    expect(res1.headers.get('content-type')).toBe('text/event-stream');
    const part1 = await readSse(res1, 5, c1);
    expect(part1.map((e) => e.event)).toEqual(['user_input', 'run_started', 'agent_invoke_started', 'agent_stream_delta', 'agent_state']);

    const c2 = new AbortController();
    const res2 = await s.http(`/v1/runs/${runId}/events/stream`, { signal: c2.signal, headers: { 'last-event-id': part1.at(-1)!.id! } });
    const text = await res2.text(); // the stream ends after the run's terminal event
    const part2: EventSourceMessage[] = [];
    const parser = createParser({ onEvent: (e) => part2.push(e) });
    parser.feed(text);
    const all = [...part1, ...part2];
    expect(all.map((e) => JSON.parse(e.data).seq)).toEqual(all.map((_, i) => i + 1));
    expect(all.at(-1)!.event).toBe('run_done');
    expect(all.every((e) => e.id === JSON.parse(e.data).cursor)).toBe(true);
  });
});

describe('observer topology', () => {
  it('serves the machines derived from their tables', async () => {
    const body = await (await s.http('/api/execution/topology')).json();
    // ABC's own machines, then the phase table of each workflow the tenant sees.
    expect(body.machines.map((m: { machine: string }) => m.machine)).toEqual(['run', 'tool_call', 'approval', 'execution_contract', 'contract_lifecycle', 'contract_step', 'workflow:wealth-onboarding@1.0.0']);
    const run = body.machines[0];
    expect(run).toMatchObject({ initial_status: 'CREATED', resumable_statuses: ['PAUSED_WAITING_TOOL', 'PAUSED_WAITING_APPROVAL'] });
    expect(run.edges).toContainEqual({ from_status: 'RUNNING', to_status: 'DONE', trigger: 'complete', allowed_actors: ['agent'] });
    const one = await (await s.http('/api/execution/topology?machine=approval')).json();
    expect(one.machines).toHaveLength(1);
    expect((await s.http('/api/execution/topology?machine=nope')).status).toBe(400);
  });
});

describe('transcripts and context', () => {
  it('lists and appends session messages with limit, before and has_more', async () => {
    const list = await (await s.http(`/v1/sessions/${SESSION}/messages?limit=1`)).json();
    expect(list).toMatchObject({ messages: [{ role: 'assistant', content: 'all done', run_id: runId }], has_more: true });
    const posted = await s.http(`/v1/sessions/${SESSION}/messages`, { method: 'POST', json: { role: 'system', content: 'note', run_id: runId } });
    expect(posted.status).toBe(201);
    const all = await (await s.http(`/v1/sessions/${SESSION}/messages`)).json();
    expect(all.messages.map((m: { content: string }) => m.content)).toEqual(['write', 'all done', 'note']);
    const older = await (await s.http(`/v1/sessions/${SESSION}/messages?before=${all.messages[1].message_id}`)).json();
    expect(older).toMatchObject({ messages: [{ content: 'write' }], has_more: false });
    const bad = await s.http(`/v1/sessions/${SESSION}/messages`, { method: 'POST', json: { role: 'robot', content: 'x' } });
    expect(bad.status).toBe(400);
  });

  it('writes versioned context and refuses a stale expected_version with 409', async () => {
    const put = (json: unknown) => s.http('/v1/context', { method: 'POST', json });
    const v1 = await (await put({ owner_type: 'session', owner_id: SESSION, data: { step: 1 } })).json();
    const key = v1.blob.context_key;
    expect((await put({ context_key: key, owner_type: 'session', owner_id: SESSION, data: { step: 2 }, expected_version: 1 })).status).toBe(200);
    const stale = await put({ context_key: key, owner_type: 'session', owner_id: SESSION, data: { step: 3 }, expected_version: 1 });
    expect(stale.status).toBe(409);
    expect((await stale.json()).error).toMatchObject({ code: 'version_conflict', retryable: false });
    expect((await (await s.http(`/v1/context/${key}`)).json()).blob).toMatchObject({ version: 2, data: { step: 2 } });
    expect((await (await s.http(`/v1/context/${key}?version=1`)).json()).blob.data).toEqual({ step: 1 });
  });

  it('lets an agent read its own session with its run token, and nothing else', async () => {
    const token = String(agent.invocations.at(-1)!.headers['x-abc-run-token']);
    const own = await s.http(`/v1/sessions/${SESSION}/messages`, { key: token });
    expect(own.status).toBe(200);
    const other = await s.http('/v1/sessions/sess_someone_else/messages', { key: token });
    expect(other.status).toBe(403);
    // Its run has ended: past the transcript, the token no longer works at all.
    const admin = await s.http('/v1/agents', { key: token });
    expect(admin.status).toBe(401);
  });
});
