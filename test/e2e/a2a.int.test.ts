// Agent-to-agent calls through ABC (seed 001 §7.3): child runs, the tree, cycles, depth, cancel.
import { createParser } from 'eventsource-parser';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readEvents } from '../../src/store/event-log.js';
import { echo, sse, startFakeAgent, type FakeAgent, type Invocation } from '../support/fake-agent.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';

let s: TestStack;
let dir: string;
const agents: Record<string, FakeAgent> = {};

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'abc-a2a-'));
  const policyFile = path.join(dir, 'policy.json');
  await writeFile(policyFile, JSON.stringify({ version: 1, default: 'allow', rules: [{ id: 'confirm-echo', tools: ['echo'], decision: 'require_approval' }] }));
  // A child run waits for its approval with nothing to send: its agent's stream stays open meanwhile.
  s = await startTestStack({ a2aMaxDepth: 3, policyFile, agentIdleTimeoutMs: 30_000 });
  for (const id of ['planner', 'weather', 'geo', 'deep']) {
    agents[id] = await startFakeAgent(echo);
    await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: id, name: id, endpoint: agents[id]!.url } });
  }
});
afterAll(async () => {
  for (const a of Object.values(agents)) await a.close();
  await s.close();
  await rm(dir, { recursive: true, force: true });
});

/** Calls another agent through ABC as the run of `inv`; returns the HTTP status and the SSE events. */
async function callAgent(inv: Invocation, target: string, content: string): Promise<{ status: number; body: string; events: { event: string; data: any }[] }> {
  const res = await fetch(`${s.url}/v1/agents/${target}:invoke`, {
    method: 'POST',
    headers: { authorization: `Bearer ${inv.headers['x-abc-run-token']}`, 'content-type': 'application/json' },
    body: JSON.stringify({ parent_run_id: inv.body.run_id, input_message: { role: 'user', content } }),
  });
  const events: { event: string; data: any }[] = [];
  const body = await res.text();
  if (res.ok) createParser({ onEvent: (e) => events.push({ event: e.event ?? 'message', data: JSON.parse(e.data) }) }).feed(body);
  return { status: res.status, body, events };
}

/** A behaviour that calls `target` and reports what happened as its own answer. */
const delegating = (target: string, seen: { status?: number; body?: string; events?: { event: string; data: any }[] } = {}) => async (inv: Invocation, res: ServerResponse) => {
  const child = await callAgent(inv, target, `from ${inv.body.agent_id}: ${inv.body.input_message.content}`);
  Object.assign(seen, child);
  const answer = child.events.find((e) => e.event === 'done')?.data.final_message ?? `failed: ${child.status}`;
  sse(res, 'delta', { text: `${target} says: ${answer}` });
  sse(res, 'done', { usage: {}, final_message: `${target} says: ${answer}` });
  res.end();
};

async function invokeAsUser(agentId: string, content: string): Promise<{ ws: WsClient; done: Record<string, any> }> {
  const ws = await new WsClient(s.url).open();
  ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
  ws.send({ type: 'agent_invoke', session_id: `sess_a2a_${Date.now()}_${Math.random().toString(36).slice(2, 6)}`, agent_id: agentId, message: { role: 'user', content } });
  const done = await Promise.race([ws.next('done'), ws.next('error')]);
  return { ws, done };
}

describe('agent-to-agent calls', () => {
  it('run as child runs, streamed back in the agent protocol, with the tree in the log', async () => {
    const seen: { events?: { event: string; data: any }[] } = {};
    agents.planner!.behave(delegating('weather', seen));
    agents.weather!.behave(echo);
    const { ws, done } = await invokeAsUser('planner', 'weather in Taipei?');
    expect(done.final_message).toBe('weather says: echo: from planner: weather in Taipei?');
    const kinds = seen.events!.map((e) => e.event);
    expect(kinds[0]).toBe('state');
    expect(kinds.at(-1)).toBe('done');
    const text = seen.events!.filter((e) => e.event === 'delta').map((e) => e.data.text).join('');
    expect(text).toBe(seen.events!.at(-1)!.data.final_message);

    const parentEvents = await readEvents(s.orm.em.fork(), { runId: done.run_id, types: ['agent_called_child'] }, '0', 10);
    const childRunId = parentEvents[0]!.payload.child_run_id as string;
    expect(parentEvents[0]!.payload).toMatchObject({ agent_id: 'weather', depth: 2 });
    const child = (await (await s.http(`/v1/runs/${childRunId}`)).json()).run;
    expect(child).toMatchObject({ parent_run_id: done.run_id, root_agent_id: 'weather', status: 'DONE' });
    expect(child.session_id).not.toBe(done.session_id); // the user's transcript stays clean
    expect(child.trace_id).toBe((await (await s.http(`/v1/runs/${done.run_id}`)).json()).run.trace_id);
    // The child's own caller saw the same trace id in its traceparent.
    expect(String(agents.weather!.invocations.at(-1)!.headers.traceparent).split('-')[1]).toBe(child.trace_id);
    // The call is an agent_call execution contract of the parent's session (seed 004).
    const t = await (await s.http(`/api/execution/${done.session_id}/timeline`)).json();
    const callContract = t.contracts.find((c: { action_type: string }) => c.action_type === 'agent_call');
    expect(callContract).toMatchObject({ action_summary: 'weather → from planner: weather in Taipei?', current_status: 'completed', run_id: done.run_id, transition_count: 2 });
    const moves = (await readEvents(s.orm.em.fork(), { runId: childRunId, types: ['execution_state'] }, '0', 10)).map((e) => e.payload.trigger);
    expect(moves).toEqual(['start', 'succeed']);
    ws.close();
  });

  it('pause a child run for its approval, and its parent\'s agent_call contract with it', async () => {
    agents.planner!.behave(delegating('weather'));
    agents.weather!.behave(async (inv, res) => {
      const auth = { authorization: `Bearer ${inv.headers['x-abc-run-token']}`, 'content-type': 'application/json' };
      type Call = { status: string; tool_call_id: string };
      let call = (await (await fetch(`${s.url}/v1/tools/echo:invoke`, { method: 'POST', headers: auth, body: JSON.stringify({ run_id: inv.body.run_id, args: { city: 'Taipei' } }) })).json()) as Call;
      while (!['succeeded', 'failed'].includes(call.status)) {
        call = (await (await fetch(`${s.url}/v1/tool_calls/${call.tool_call_id}:wait?timeout_ms=5000`, { method: 'POST', headers: auth })).json()) as Call;
      }
      sse(res, 'done', { usage: {}, final_message: `echo ${call.status}` });
      res.end();
    });
    const answered = invokeAsUser('planner', 'weather in Taipei?');
    const pending = async () => (await (await s.http('/v1/approvals?status=PENDING')).json()).approvals.filter((a: { tool_name: string }) => a.tool_name === 'echo');
    await expect.poll(async () => (await pending()).length).toBe(1);
    const [approval] = await pending();
    const child = (await (await s.http(`/v1/runs/${approval.run_id}`)).json()).run;
    expect(child).toMatchObject({ status: 'PAUSED_WAITING_APPROVAL', root_agent_id: 'weather' });
    // The parent's contract for the call waits with its child (seed 004: a child run is its parent's agent_call).
    const contractOf = async () =>
      (await (await s.http(`/api/execution/${(await (await s.http(`/v1/runs/${child.parent_run_id}`)).json()).run.session_id}/timeline`)).json()).contracts.find(
        (c: { action_type: string }) => c.action_type === 'agent_call',
      );
    expect(await contractOf()).toMatchObject({ current_status: 'waiting' });

    const decided = await s.http(`/v1/approvals/${approval.approval_id}:decide`, { method: 'POST', headers: { 'x-user-id': 'u1' }, json: { decision: 'approve' } });
    expect(decided.status).toBe(200);
    const { ws, done } = await answered;
    expect(done.final_message).toBe('weather says: echo succeeded');
    expect(await contractOf()).toMatchObject({ current_status: 'completed' });
    const mirrored = (await readEvents(s.orm.em.fork(), { runId: child.run_id, types: ['execution_state'] }, '0', 50))
      .filter((e) => String(e.payload.action_summary).startsWith('weather →'))
      .map((e) => e.payload.trigger);
    expect(mirrored).toEqual(['start', 'suspend', 'resume', 'succeed']);
    ws.close();
  });

  it('refuses a cycle (planner -> weather -> planner)', async () => {
    const inner: { status?: number; body?: string } = {};
    agents.planner!.behave(delegating('weather'));
    agents.weather!.behave(delegating('planner', inner));
    const { ws, done } = await invokeAsUser('planner', 'loop');
    expect(inner.status).toBe(412);
    expect(JSON.parse(inner.body!).error).toMatchObject({ code: 'a2a_cycle', message: 'agent call cycle refused: planner -> weather -> planner' });
    expect(done.final_message).toBe('weather says: planner says: failed: 412');
    ws.close();
  });

  it('refuses calls nested deeper than the limit', async () => {
    const third: { status?: number; body?: string } = {};
    agents.planner!.behave(delegating('weather'));
    agents.weather!.behave(delegating('geo'));
    agents.geo!.behave(delegating('deep', third));
    const { ws } = await invokeAsUser('planner', 'deep');
    expect(third.status).toBe(412);
    expect(JSON.parse(third.body!).error).toMatchObject({ code: 'a2a_depth_exceeded', details: { max_depth: 3 } });
    ws.close();
  });

  it('cancels the children of a cancelled run', async () => {
    let childRun = '';
    agents.planner!.behave(async (inv, res) => {
      sse(res, 'delta', { text: 'delegating' });
      await callAgent(inv, 'weather', 'slow');
      await inv.closed;
    });
    agents.weather!.behave(async (inv, res) => {
      childRun = inv.body.run_id;
      sse(res, 'delta', { text: 'thinking' });
      await inv.closed;
    });
    const ws = await new WsClient(s.url).open();
    ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
    ws.send({ type: 'agent_invoke', session_id: `sess_a2a_cancel_${Date.now()}`, agent_id: 'planner', message: { role: 'user', content: 'x' } });
    const delta = await ws.next('delta');
    await expect.poll(() => childRun).not.toBe('');
    await expect.poll(async () => (await (await s.http(`/v1/runs/${childRun}`)).json()).run.status).toBe('RUNNING');
    ws.send({ type: 'cancel_run', run_id: delta.run_id });
    await expect.poll(async () => (await (await s.http(`/v1/runs/${childRun}`)).json()).run.status, { timeout: 5000 }).toBe('CANCELLED');
    const c = await (await s.http(`/api/execution/${delta.session_id}/consequences`)).json();
    expect(c.views).toEqual([expect.objectContaining({ action_type: 'agent_call', consequence_label: 'CANCELLED', is_still_pending: false })]);
    await agents.weather!.invocations.at(-1)!.closed;
    ws.close();
  });
});
