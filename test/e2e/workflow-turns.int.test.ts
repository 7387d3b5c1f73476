// Turns of a phase workflow over the IM WebSocket, against a scripted model
// behind the LLM proxy: the reference workflow walked through its five
// phases, tagged payloads cut across chunks, a malformed payload, a tool
// outside the phase refused, retry noise kept out of the message, and each
// fallback with the hard stream deadline.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readEvents } from '../../src/store/event-log.js';
import { phaseTransitions } from '../../src/store/workflow-sessions.js';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { chunk, startFakeLlm, type FakeLlm, type LlmRequest } from '../support/fake-llm.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';
import { TOOLS } from '../../examples/wealth-onboarding/tools.js';

type Json = Record<string, any>;

/** One scripted model answer: text streamed in chunks of `size`, or tool calls; `cut` breaks the stream, `stall` never answers. */
interface Reply {
  text?: string;
  size?: number;
  tools?: { name: string; args: Json }[];
  cut?: boolean;
  stall?: boolean;
}

let s: TestStack;
let model: FakeLlm;
let tools: http.Server;
let toolUrl: string;
const script: Reply[] = [];
const toolCalls: Json[] = [];
let flaky = 0;

function answer(req: LlmRequest, res: ServerResponse): void | Promise<void> {
  const reply = script.shift();
  if (!reply) return void res.writeHead(500).end('{"error":{"message":"the script ran out"}}');
  if (reply.stall) return req.closed;
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const send = (delta: Json, finish: string | null = null) => res.write(`data: ${JSON.stringify(chunk(req.json.model, delta, finish))}\n\n`);
  if (reply.tools) {
    reply.tools.forEach((t, index) => send({ tool_calls: [{ index, id: `call_${index}_${Date.now()}`, type: 'function', function: { name: t.name, arguments: JSON.stringify(t.args) } }] }));
    send({}, 'tool_calls');
  } else {
    const text = reply.text ?? '';
    const size = reply.size ?? 7;
    for (let i = 0; i < text.length; i += size) send({ content: text.slice(i, i + size) });
    if (reply.cut) return void setTimeout(() => res.socket?.destroy(), 20);
    send({}, 'stop');
  }
  res.write(`data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 0, model: req.json.model, choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } })}\n\n`);
  res.end('data: [DONE]\n\n');
}

beforeAll(async () => {
  model = await startFakeLlm(answer);
  tools = http.createServer(async (req, res) => {
    let raw = '';
    for await (const c of req) raw += c;
    const body = JSON.parse(raw) as Json;
    toolCalls.push(body);
    const send = (status: number, doc: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(doc));
    // The example's tools (examples/wealth-onboarding), and a quote service that fails once for FLAKY.
    if (body.args.symbol === 'FLAKY' && flaky++ === 0) return send(503, { error: { code: 'QUOTES_BUSY', message: 'try again', retryable: false } });
    send(200, TOOLS[body.tool]!(body.args));
  });
  await new Promise<void>((r) => tools.listen(0, '127.0.0.1', r));
  toolUrl = `http://127.0.0.1:${(tools.address() as AddressInfo).port}/tools`;
  s = await startTestStack({ llm: { routerUrl: model.url, timeoutMs: 5000, model: 'gpt-4o-mini' }, agentIdleTimeoutMs: 30_000 });
  // The example's tool definitions, pointed at this test's server.
  for (const tool of JSON.parse(readFileSync('examples/wealth-onboarding/tools.json', 'utf8')) as Json[]) {
    expect((await s.http('/v1/tools/register', { method: 'POST', json: { ...tool, endpoint: toolUrl } })).status).toBe(200);
  }
});
afterAll(async () => {
  await s?.close();
  await model?.close();
  tools?.close();
});

/** One turn over IM: its frames from run_started to done. */
async function turn(ws: WsClient, sessionId: string, content: string, agentId = 'workflow:wealth-onboarding'): Promise<Json[]> {
  const from = ws.frames.length;
  ws.send({ type: 'agent_invoke', session_id: sessionId, agent_id: agentId, message: { role: 'user', content } });
  await ws.until((f) => f.slice(from).some((x) => x.type === 'done' || x.type === 'error'), 15_000);
  return ws.frames.slice(from);
}
const states = (frames: Json[], name: string) => frames.filter((f) => f.type === 'state' && f.state === name).map((f) => f.detail);
const text = (frames: Json[]) => frames.filter((f) => f.type === 'delta').map((f) => f.text).join('');
const done = (frames: Json[]) => frames.find((f) => f.type === 'done')!;
const summary = (frames: Json[]) => frames.map((f) => (f.type === 'state' ? `state:${f.state}` : f.type)).filter((t, i, all) => t !== 'delta' || all[i - 1] !== 'delta');

async function client(userId = 'alice'): Promise<WsClient> {
  const ws = await new WsClient(s.url).open();
  ws.send({ type: 'hello', api_key: s.key, user_id: userId });
  await ws.next('hello_ack');
  return ws;
}

describe('the reference workflow, walked over IM', () => {
  it('goes kyc → pre_strategy → strategy → stress_test → deployment, with its events, messages and audited moves', async () => {
    const ws = await client();
    const session = `sess_walk_${Date.now()}`;

    // kyc, turn 1: a state patch cut across chunk boundaries never reaches a delta.
    script.push({ text: 'Welcome! <AGENT_STATE_PATCH>{"risk_tolerance": "medium"}</AGENT_STATE_PATCH>How many years can you invest for?', size: 3 });
    const t1 = await turn(ws, session, 'Hi, I want to invest.');
    expect(summary(t1)).toEqual(['run_started', 'state:stream_start', 'delta', 'state:state_patch', 'done']);
    expect(states(t1, 'stream_start')[0]).toMatchObject({ workflow_id: 'wealth-onboarding', phase: 'kyc', turn: 1 });
    expect(text(t1)).toBe('Welcome! How many years can you invest for?');
    expect(t1.filter((f) => f.type === 'delta').every((f) => !f.text.includes('<') && !f.text.includes('AGENT'))).toBe(true);
    expect(states(t1, 'state_patch')[0]).toMatchObject({ phase: 'kyc', state: { risk_tolerance: 'medium' } });
    expect(done(t1).detail).toEqual({ workflow_id: 'wealth-onboarding', version: '1.0.0', phase: 'kyc', status: 'in_progress', missing_fields: ['horizon_years', 'investable_amount'], stream_error: null });

    // kyc, turn 2: complete; the move to pre_strategy and its carryover.
    script.push({ text: 'Thank you. <AGENT_STATE_PATCH>{"horizon_years": 10, "investable_amount": 50000}</AGENT_STATE_PATCH>Let us pick an instrument.' });
    const t2 = await turn(ws, session, 'Ten years, 50,000.');
    expect(summary(t2)).toEqual(['run_started', 'state:stream_start', 'delta', 'state:state_patch', 'state:phase_change', 'done']);
    expect(states(t2, 'phase_change')[0]).toEqual({ from: 'kyc', to: 'pre_strategy', reason: 'the client profile is complete', trigger: 'handler_completed' });
    expect(done(t2).detail).toMatchObject({ phase: 'pre_strategy', status: 'phase_completed', missing_fields: ['target_instrument', 'objective'] });

    // pre_strategy: the carryover reaches the model once; a tool call through the tool service; GenUI from its result.
    script.push({ tools: [{ name: 'market_quote', args: { symbol: 'VTI' } }] }, { text: 'VTI trades at 250.50. <AGENT_STATE_PATCH>{"target_instrument": "VTI", "objective": "growth"}</AGENT_STATE_PATCH>' });
    const before = model.requests.length;
    const t3 = await turn(ws, session, 'Something broad, for growth.');
    const sent = model.requests[before]!.json;
    expect(sent.messages.at(-1).content).toBe('Client profile from KYC: risk tolerance medium, horizon 10 years, amount 50000.\n\nSomething broad, for growth.');
    expect(sent.tools).toEqual([{ type: 'function', function: { name: 'market_quote', description: 'A quote for a symbol, with 30 days of closes.', parameters: expect.objectContaining({ required: ['symbol'] }) } }]);
    expect(sent.tool_choice).toBe('auto');
    expect(sent.messages[0].content).toContain('You are in phase pre_strategy');
    expect(toolCalls.at(-1)).toMatchObject({ args: { symbol: 'VTI' } });
    const quote = TOOLS['market.quote']!({ symbol: 'VTI' });
    const toolMessage = model.requests[before + 1]!.json.messages.at(-1);
    expect(toolMessage.role).toBe('tool');
    expect(JSON.parse(toolMessage.content)).toEqual(quote);
    expect(states(t3, 'genui')).toEqual([{ type: 'instrument_chart', payload: quote, source: 'market.quote' }]);
    expect(states(t3, 'phase_change')[0]).toMatchObject({ from: 'pre_strategy', to: 'strategy' });
    // The strategy phase's first turn gets pre_strategy's carryover; its next turn none.
    script.push({ text: 'Here is a draft: buy VTI monthly. <AGENT_UI_JSON>{"type": "strategy_ref", "payload": {"strategy_id": "s-1"}}</AGENT_UI_JSON><AGENT_STATE_PATCH>{"strategy_id": "s-1"}</AGENT_STATE_PATCH>' });
    const t4 = await turn(ws, session, 'Draft something.');
    expect(model.requests.at(-1)!.json.messages.at(-1).content).toBe('Instrument VTI, objective growth; risk tolerance medium.\n\nDraft something.');
    expect(states(t4, 'genui')).toEqual([{ type: 'strategy_ref', payload: { strategy_id: 's-1' } }]);
    expect(done(t4).detail).toMatchObject({ phase: 'strategy', status: 'in_progress', missing_fields: [] });

    // strategy completes once confirmed and backtested.
    script.push({ text: 'Confirmed. <AGENT_STATE_PATCH>{"confirmed": true, "backtest": {"status": "completed", "total_return": 0.12}}</AGENT_STATE_PATCH>' });
    expect(states(await turn(ws, session, 'Yes, confirm it.'), 'phase_change')[0]).toMatchObject({ from: 'strategy', to: 'stress_test', reason: 'strategy confirmed and backtested' });
    expect(model.requests.at(-1)!.json.messages.at(-1).content).toBe('Yes, confirm it.');

    script.push({ text: 'The report is in. <AGENT_STATE_PATCH>{"scenario_set_id": "sc-1", "stress_report_id": "sr-1", "stress_test_decision": "proceed"}</AGENT_STATE_PATCH>' });
    const t6 = await turn(ws, session, 'Proceed.');
    expect(states(t6, 'stream_start')[0]).toMatchObject({ phase: 'stress_test', stage: 'bootstrap' });
    expect(states(t6, 'phase_change')[0]).toMatchObject({ from: 'stress_test', to: 'deployment' });

    script.push({ text: 'Deployed and running. <AGENT_STATE_PATCH>{"deployment_target": "paper", "risk_guard_status": "ok", "deployment_id": "d-1", "deployment_status": "completed"}</AGENT_STATE_PATCH>' });
    const t7 = await turn(ws, session, 'Deploy to paper trading.');
    expect(states(t7, 'stream_start')[0]).toMatchObject({ phase: 'deployment', stage: 'ready' });
    expect(done(t7).detail).toMatchObject({ phase: 'deployment', status: 'completed', missing_fields: [] });

    // Persisted: messages without tags, the final tool outcomes on the message, every move audited.
    const messages = (await (await s.http(`/v1/sessions/${session}/messages`)).json()).messages as Json[];
    const assistant = messages.filter((m) => m.role === 'assistant');
    expect(assistant.map((m) => m.content)).toEqual([
      'Welcome! How many years can you invest for?',
      'Thank you. Let us pick an instrument.',
      'VTI trades at 250.50.',
      'Here is a draft: buy VTI monthly.',
      'Confirmed.',
      'The report is in.',
      'Deployed and running.',
    ]);
    expect(assistant[2]!.metadata.tool_calls).toEqual([expect.objectContaining({ tool: 'market.quote', status: 'succeeded', result: quote })]);
    const moves = await phaseTransitions(s.orm.em.fork(), session);
    expect(moves.map((m) => `${m.from_phase}->${m.to_phase}:${m.trigger}:${m.accepted}`)).toEqual([
      'kyc->pre_strategy:handler_completed:true',
      'pre_strategy->strategy:handler_completed:true',
      'strategy->stress_test:handler_completed:true',
      'stress_test->deployment:handler_completed:true',
    ]);
    ws.close();
  });
});

describe('a turn', () => {
  it('drops a malformed payload, keeps the state, and still answers', async () => {
    const ws = await client('bob');
    const session = `sess_bad_${Date.now()}`;
    script.push({ text: 'Noted. <AGENT_STATE_PATCH>{"risk_tolerance": }</AGENT_STATE_PATCH>And your horizon?' });
    const frames = await turn(ws, session, 'Medium risk.');
    expect(states(frames, 'state_patch')).toEqual([]);
    expect(text(frames)).toBe('Noted. And your horizon?');
    expect(done(frames).detail).toMatchObject({ status: 'in_progress', missing_fields: ['risk_tolerance', 'horizon_years', 'investable_amount'] });
    ws.close();
  });

  it("refuses a tool outside the phase's tools at the tool service, and records why", async () => {
    const ws = await client('carol');
    const session = `sess_refuse_${Date.now()}`;
    const calls = toolCalls.length;
    // kyc offers no tools; a model that calls one anyway is refused there, not only left without it.
    script.push({ tools: [{ name: 'market_quote', args: { symbol: 'VTI' } }] }, { text: 'I cannot look that up yet.' });
    const before = model.requests.length;
    const frames = await turn(ws, session, 'What does VTI trade at?');
    expect(model.requests[before]!.json.tools).toBeUndefined();
    expect(toolCalls.length).toBe(calls);
    expect(text(frames)).toBe('I cannot look that up yet.');
    const toolMessage = model.requests[before + 1]!.json.messages.at(-1);
    expect(JSON.parse(toolMessage.content).error).toMatchObject({ code: 'blocked', message: expect.stringContaining('not allowed in phase kyc') });
    const runId = done(frames).run_id;
    const decisions = await readEvents(s.orm.em.fork(), { runId, types: ['policy_decision'] }, '0', 10);
    expect(decisions.map((e) => e.payload)).toEqual([expect.objectContaining({ decision: 'block', rule_id: 'workflow_phase', tool: 'market.quote' })]);
    ws.close();
  });

  it('keeps a failure that a retry repaired out of the message, and in the event log', async () => {
    const ws = await client('dave');
    const session = `sess_noise_${Date.now()}`;
    // Get to pre_strategy, which may quote.
    script.push({ text: '<AGENT_STATE_PATCH>{"risk_tolerance": "low", "horizon_years": 5, "investable_amount": 1000}</AGENT_STATE_PATCH>Done.' });
    await turn(ws, session, 'Low, 5 years, 1000.');
    script.push({ tools: [{ name: 'market_quote', args: { symbol: 'FLAKY' } }] }, { tools: [{ name: 'market_quote', args: { symbol: 'FLAKY' } }] }, { text: 'Got it on the second try.' });
    const frames = await turn(ws, session, 'Quote FLAKY.');
    expect(text(frames)).toBe('Got it on the second try.');
    const runId = done(frames).run_id;
    const results = await readEvents(s.orm.em.fork(), { runId, types: ['tool_result'] }, '0', 10);
    expect(results.map((e) => Boolean(e.payload.error))).toEqual([true, false]);
    const messages = (await (await s.http(`/v1/sessions/${session}/messages`)).json()).messages as Json[];
    expect(messages.at(-1)!.metadata.tool_calls).toEqual([expect.objectContaining({ tool: 'market.quote', status: 'succeeded' })]);
    ws.close();
  });
});

describe('phase moves', () => {
  const gates = {
    workflow_id: 'gates',
    version: '1.0.0',
    initial_phase: 'a',
    phases: [
      { id: 'a', instructions: 'Phase a.', handler: { kind: 'agent', agent_id: 'judge' }, genui: { allowed_types: ['verdict'] } },
      { id: 'b', instructions: 'Phase b.' },
      { id: 'c', instructions: 'Phase c.' },
    ],
    transitions: [
      { from: 'a', to: 'b', trigger: 'handler_completed' },
      { from: 'b', to: 'c', trigger: 'route' },
      { from: 'b', to: 'a', trigger: 'boundary', guard: { blocked: { exists: true } } },
    ],
  };
  let judge: FakeAgent;
  const verdicts: Json[] = [];

  beforeAll(async () => {
    judge = await startFakeAgent();
    judge.behave((_inv, res) => {
      sse(res, 'done', { usage: {}, final_message: JSON.stringify(verdicts.shift()) });
      res.end();
    });
    expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'judge', name: 'Judge', endpoint: judge.url } })).status).toBe(200);
    expect((await s.http('/v1/workflows', { method: 'POST', json: gates })).status).toBe(201);
  });
  afterAll(() => judge?.close());

  it('take a handler agent’s verdict, refuse and audit an illegal one, and move at a boundary', async () => {
    const ws = await client('frank');
    const session = `sess_gates_${Date.now()}`;
    const agent = 'workflow:gates';

    // The judge names a move the table does not have: refused, recorded, the session stays.
    verdicts.push({ completed: true, next_phase: 'c', transition_reason: 'skip ahead' });
    script.push({ text: 'First answer.' });
    const refused = await turn(ws, session, 'one', agent);
    expect(states(refused, 'phase_change')).toEqual([]);
    expect(done(refused).detail).toMatchObject({ phase: 'a', status: 'move_refused', handler_error: expect.stringContaining('not allowed') });
    const input = JSON.parse(judge.invocations.at(-1)!.body.input_message.content);
    expect(input).toMatchObject({ workflow_id: 'gates', phase: 'a', reply: 'First answer.', state: {} });

    // A legal verdict: its patch, its GenUI, its move.
    verdicts.push({ completed: true, next_phase: 'b', transition_reason: 'the judge is satisfied', state_patch: { score: 9 }, genui: [{ type: 'verdict', score: 9 }] });
    script.push({ text: 'Second answer.' });
    const moved = await turn(ws, session, 'two', agent);
    expect(states(moved, 'state_patch')[0]).toMatchObject({ phase: 'a', state: { score: 9 } });
    expect(states(moved, 'genui')).toEqual([{ type: 'verdict', score: 9 }]);
    expect(states(moved, 'phase_change')).toEqual([{ from: 'a', to: 'b', reason: 'the judge is satisfied', trigger: 'handler_completed' }]);

    // In b the model records a blocker; the next turn's boundary check moves back to a before it streams.
    script.push({ text: 'Blocked. <AGENT_STATE_PATCH>{"blocked": "RISK_LIMIT"}</AGENT_STATE_PATCH>' });
    expect(done(await turn(ws, session, 'three', agent)).detail).toMatchObject({ phase: 'b' });
    verdicts.push({ completed: false, missing_fields: ['evidence'] });
    script.push({ text: 'Back in a.' });
    const back = await turn(ws, session, 'four', agent);
    expect(summary(back).slice(0, 3)).toEqual(['run_started', 'state:phase_change', 'state:stream_start']);
    expect(states(back, 'phase_change')[0]).toEqual({ from: 'b', to: 'a', reason: 'boundary: blocked', trigger: 'boundary' });
    expect(done(back).detail).toMatchObject({ phase: 'a', status: 'in_progress', missing_fields: ['evidence'] });

    const moves = await phaseTransitions(s.orm.em.fork(), session);
    expect(moves.map((m) => [m.from_phase, m.to_phase, m.trigger, m.actor, m.accepted])).toEqual([
      ['a', 'c', 'handler_completed', 'handler', false],
      ['a', 'b', 'handler_completed', 'handler', true],
      ['b', 'a', 'boundary', 'system', true],
    ]);
    ws.close();
  });

  it('takes a route transition of the table, refuses and records any other, and shows the session', async () => {
    const ws = await client('gina');
    const session = `sess_route_${Date.now()}`;
    verdicts.push({ completed: true, next_phase: 'b', state_patch: { score: 7 } });
    script.push({ text: 'Done with a.' });
    expect(done(await turn(ws, session, 'go', 'workflow:gates')).detail).toMatchObject({ phase: 'b' });

    const advance = (to_phase: string) => s.http(`/v1/workflow-sessions/${session}:advance`, { method: 'POST', json: { to_phase, reason: 'the user pressed continue' } });
    const refused = await advance('a');
    expect(refused.status).toBe(412);
    expect((await refused.json()).error).toMatchObject({ code: 'illegal_transition', details: { from: 'b', trigger: 'route:a' } });
    const moved = await advance('c');
    expect(moved.status).toBe(200);
    const view = (await moved.json()).session;
    expect(view).toMatchObject({ session_id: session, workflow_id: 'gates', version: '1.0.0', phase: 'c', phase_turns: { a: 1 }, states: { a: { score: 7 }, b: {}, c: {} } });
    expect(view.moves.map((m: Json) => [m.from_phase, m.to_phase, m.trigger, m.actor, m.accepted])).toEqual([
      ['a', 'b', 'handler_completed', 'handler', true],
      ['b', 'a', 'route', 'client:gina', false],
      ['b', 'c', 'route', 'client:gina', true],
    ]);
    script.push({ text: 'In c now.' });
    expect(states(await turn(ws, session, 'next', 'workflow:gates'), 'stream_start')[0]).toMatchObject({ phase: 'c' });

    // Nobody else's session, and no session a workflow does not lead.
    expect((await s.http('/v1/workflow-sessions/sess_nobody')).status).toBe(404);
    ws.close();
  });
});

describe('fallbacks', () => {
  const quick = {
    workflow_id: 'quick',
    version: '1.0.0',
    initial_phase: 'ask',
    phases: [
      {
        id: 'ask',
        instructions: 'Ask for a name.',
        required_fields: ['name'],
        max_turns: 3,
        stream_timeout_ms: 1000,
        fallbacks: { empty_reply: 'Say that again?', stream_error: 'Connection lost.', turn_limit: 'Let us stop here.', missing_fields: 'I still need: {{#each /missing_fields}}{{.}}{{/each}}.' },
      },
    ],
    transitions: [],
  };

  it('end every turn with a message and a done: empty reply, missing fields, broken stream, the hard deadline, the turn limit', async () => {
    expect((await s.http('/v1/workflows', { method: 'POST', json: quick })).status).toBe(201);
    const ws = await client('erin');
    const session = `sess_fallback_${Date.now()}`;
    const agent = 'workflow:quick';

    script.push({ text: '' });
    const empty = await turn(ws, session, 'Hello', agent);
    expect(text(empty)).toBe('I still need: name.');
    expect(done(empty).detail).toMatchObject({ status: 'in_progress', fallback: 'missing_fields', stream_error: null });

    script.push({ text: 'Your na', cut: true });
    const cut = await turn(ws, session, 'Hi again', agent);
    expect(text(cut)).toBe('Your na\n\nConnection lost.');
    expect(done(cut).detail).toMatchObject({ status: 'stream_error', fallback: 'stream_error', stream_error: { detail: 'stream_interrupted' } });

    script.push({ stall: true });
    const stalled = await turn(ws, session, 'Are you there?', agent);
    expect(text(stalled)).toBe('Connection lost.');
    expect(done(stalled).detail).toMatchObject({ status: 'stream_error', stream_error: { detail: 'stream_timeout' } });
    expect(done(stalled).final_message).toBe('Connection lost.');

    script.push({ text: 'Still here.' });
    const limit = await turn(ws, session, 'Well?', agent);
    expect(text(limit)).toBe('Still here.\n\nLet us stop here.');
    expect(done(limit).detail).toMatchObject({ status: 'turn_limit', fallback: 'turn_limit' });
    ws.close();
  });
});
