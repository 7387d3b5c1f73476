// Tools, policy and approvals through the gateway (seed 001 §4.3, §4.5, §7.2, §8.2, §8.3).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { writeTool } from '../../src/store/tool-store.js';
import { readEvents } from '../../src/store/event-log.js';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';
import { readSse } from '../support/sse.js';
import { liveRun as startLiveRun } from '../support/live-run.js';
import { failure, unary, withKey } from '../support/grpc.js';
import { status } from '@grpc/grpc-js';
import { ApprovalStatus, type ListApprovalsRequest } from '../../gen/abc/orchestrator/v1/approval.js';

let s: TestStack;
let agent: FakeAgent;
let webhook: http.Server;
let webhookUrl: string;
let webhookCalls: { args: Record<string, unknown>; headers: http.IncomingHttpHeaders }[] = [];
let webhookBehaviour: (args: Record<string, any>, res: http.ServerResponse) => void;
let dir: string;
let policyFile: string;

const POLICY = {
  version: 1,
  default: 'allow',
  rules: [
    { id: 'no-deletes', tools: ['db.delete'], decision: 'block', reason: 'deletes are forbidden' },
    { id: 'big-transfers', tools: ['payments.transfer'], when: { args: { amount: { gt: 100 } } }, decision: 'require_approval' },
    { id: 'confirm-email', tools: ['email.send'], decision: 'require_approval' },
  ],
};

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'abc-tools-'));
  policyFile = path.join(dir, 'policy.json');
  await writeFile(policyFile, JSON.stringify(POLICY));
  webhook = http.createServer(async (req, res) => {
    let raw = '';
    for await (const c of req) raw += c;
    const body = JSON.parse(raw) as { args: Record<string, unknown> };
    webhookCalls.push({ args: body.args, headers: req.headers });
    webhookBehaviour(body.args, res);
  });
  await new Promise<void>((r) => webhook.listen(0, '127.0.0.1', r));
  webhookUrl = `http://127.0.0.1:${(webhook.address() as AddressInfo).port}/hook`;
  // Held runs outlive the policy reload's waits: a run token works only while its run lives.
  s = await startTestStack({ policyFile, approvalTimeoutMs: 60_000, timerSweepMs: 100, agentIdleTimeoutMs: 30_000 });
  agent = await startFakeAgent();
  await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'worker', name: 'Worker', endpoint: agent.url } });
  for (const tool of [
    { name: 'payments.transfer', kind: 'http', endpoint: webhookUrl, side_effect: true, permission_level: 'INTERNAL', timeout_ms: 2000,
      input_schema: { type: 'object', required: ['amount', 'to'], properties: { amount: { type: 'number' }, to: { type: 'string' } } } },
    { name: 'db.delete', kind: 'http', endpoint: webhookUrl, side_effect: true },
    { name: 'slow.thing', kind: 'http', endpoint: webhookUrl, timeout_ms: 200 },
  ]) {
    const res = await s.http('/v1/tools/register', { method: 'POST', json: tool });
    expect(res.status, JSON.stringify(await res.clone().json())).toBe(200);
  }
});
afterAll(async () => {
  await agent.close();
  await s.close();
  webhook.closeAllConnections();
  webhook.close();
  await rm(dir, { recursive: true, force: true });
});
beforeEach(() => {
  webhookCalls = [];
  webhookBehaviour = (args, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, echoed: args }));
});

/** A run whose agent holds until released; returns its ids, its token and an open IM client. */
const liveRun = (userId = 'u1') => startLiveRun(s, agent, { agentId: 'worker', userId, content: 'pay' });

const invoke = (token: string, tool: string, body: Record<string, unknown>) =>
  s.http(`/v1/tools/${tool}:invoke`, { method: 'POST', json: body, key: token }).then(async (r) => ({ status: r.status, body: await r.json() }));

/** A run's approvals over HTTP, oldest first; `query` narrows them (`status=PENDING`). */
const approvalsOf = async (runId: string, query = '') => (await (await s.http(`/v1/approvals?run_id=${runId}${query && `&${query}`}`)).json()).approvals;

/** A decision over HTTP, by `userId`. */
const decide = (approvalId: string, decision: string, userId: string, reason?: string) =>
  s.http(`/v1/approvals/${approvalId}:decide`, { method: 'POST', json: { decision, ...(reason && { reason }) }, headers: { 'x-user-id': userId } });

const runStatus = async (runId: string) => (await (await s.http(`/v1/runs/${runId}`)).json()).run.status;
const types = async (runId: string, only?: string[]) => (await readEvents(s.orm.em.fork(), { runId, types: only }, '0', 1000)).map((e) => e.type);

describe('allowed server tools', () => {
  it('runs a built-in tool and answers succeeded, recording every hop', async () => {
    const run = await liveRun();
    const res = await invoke(run.token, 'echo', { run_id: run.runId, args: { hello: 'world' } });
    expect(res).toMatchObject({ status: 200, body: { status: 'succeeded', result: { hello: 'world' }, tool_call_id: expect.stringMatching(/^tc_/) } });
    const call = await (await s.http(`/v1/tool_calls/${res.body.tool_call_id}`, { key: run.token })).json();
    expect(call).toMatchObject({ status: 'succeeded', result: { hello: 'world' }, timestamps: { created_at: expect.any(Number), started_at: expect.any(Number), completed_at: expect.any(Number) } });
    expect(await types(run.runId, ['tool_call_created', 'policy_decision', 'tool_dispatched', 'tool_result'])).toEqual(['tool_call_created', 'policy_decision', 'tool_dispatched', 'tool_result']);
    // Many clients send content-type: application/json with an empty body: that is no body, not a 400.
    const waited = await s.http(`/v1/tool_calls/${res.body.tool_call_id}:wait`, { method: 'POST', key: run.token, headers: { 'content-type': 'application/json' } });
    expect(waited.status).toBe(200);
    expect((await waited.json()).status).toBe('succeeded');
    run.release();
    run.ws.close();
  });

  it('records an allowed call: every hop and its event, its contract with each transition, and its fact, field by field', async () => {
    const run = await liveRun();
    const res = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 4, to: 'acct-9' }, idempotency_key: 'pay-4-acct-9' });
    expect(res.body).toMatchObject({ status: 'succeeded', result: { ok: true, echoed: { amount: 4, to: 'acct-9' } } });
    const id = res.body.tool_call_id;
    const em = s.orm.em.fork();
    const [call] = await em.execute(
      `SELECT status, version, args, result, error, idempotency_key, timeout_ms, started_at IS NOT NULL AS started, completed_at IS NOT NULL AS completed,
              deadline_at - created_at BETWEEN interval '1.9 seconds' AND interval '2.5 seconds' AS deadline FROM tool_calls WHERE tool_call_id = ?`,
      [id],
    );
    expect(call).toEqual({
      status: 'SUCCEEDED', version: 5, args: { amount: 4, to: 'acct-9' }, result: { ok: true, echoed: { amount: 4, to: 'acct-9' } }, error: null,
      idempotency_key: 'pay-4-acct-9', timeout_ms: 2000, started: true, completed: true, deadline: true,
    });
    const [contract] = await em.execute<{ execution_id: string }[]>(
      'SELECT execution_id, tenant_id, session_id, action_type, action_summary, status, irreversible, idempotency_key, timeout_seconds, result, error_message, version FROM execution_contracts WHERE subject_id = ?',
      [id],
    );
    const exe = contract!.execution_id;
    expect(contract).toEqual({
      execution_id: expect.stringMatching(/^exe_/), tenant_id: 'default', session_id: run.sessionId, action_type: 'tool_call', action_summary: 'payments.transfer → acct-9',
      status: 'completed', irreversible: true, idempotency_key: 'pay-4-acct-9', timeout_seconds: 2, result: '{"ok":true,"echoed":{"to":"acct-9","amount":4}}', error_message: null, version: 3,
    });
    expect(await em.execute('SELECT sequence_number, from_status, to_status, trigger, actor, actor_category FROM execution_transitions WHERE execution_id = ? ORDER BY sequence_number', [exe])).toEqual([
      { sequence_number: 0, from_status: 'pending', to_status: 'running', trigger: 'start', actor: 'tool_node', actor_category: 'tool' },
      { sequence_number: 1, from_status: 'running', to_status: 'completed', trigger: 'succeed', actor: 'tool_node', actor_category: 'tool' },
    ]);
    const [fact] = await em.execute<{ value: Record<string, unknown> }[]>("SELECT scope, scope_id, value FROM memory WHERE key = 'execution_fact:' || ?", [exe]);
    expect(fact).toEqual({
      scope: 'SESSION', scope_id: run.sessionId,
      value: {
        type: 'execution_fact', execution_id: exe, action_type: 'tool_call', action_summary: 'payments.transfer → acct-9', final_status: 'completed', irreversible: true,
        duration_ms: expect.any(Number), result_summary: '{"ok":true,"echoed":{"to":"acct-9","amount":4}}', error_summary: null,
      },
    });
    const events = (await readEvents(em, { runId: run.runId }, '0', 1000)).filter((e) => e.payload.tool_call_id === id || e.payload.execution_id === exe);
    const state = (from: string, to: string, trigger: string, actor: string, terminal = false) => ({
      type: 'execution_state',
      payload: {
        execution_id: exe, action_summary: 'payments.transfer → acct-9', from_status: from, to_status: to, trigger, actor_category: actor, is_terminal: terminal,
        is_resumable: false, has_side_effects: true, timestamp: expect.any(Number),
      },
    });
    const hop = (from: string, to: string, trigger: string) => ({ type: 'tool_call_state', payload: { tool_call_id: id, from, to, trigger } });
    expect(events.map(({ type, payload }) => ({ type, payload }))).toEqual([
      { type: 'tool_call_created', payload: { tool_call_id: id, tool_name: 'payments.transfer', kind: 'http', args: { amount: 4, to: 'acct-9' }, idempotency_key: 'pay-4-acct-9' } },
      { type: 'policy_decision', payload: { tool_call_id: id, decision: 'allow', reason: 'no rule matched', rule_id: 'default', policy_version: 1, policy_scope: 'platform' } },
      hop('CREATED', 'POLICY_CHECKED', 'policy_checked'),
      { type: 'tool_dispatched', payload: { tool_call_id: id, kind: 'http' } },
      hop('POLICY_CHECKED', 'DISPATCHED', 'dispatch'),
      hop('DISPATCHED', 'RUNNING', 'start'),
      state('pending', 'running', 'start', 'tool'),
      { type: 'tool_result', payload: { tool_call_id: id, status: 'succeeded', result: { ok: true, echoed: { amount: 4, to: 'acct-9' } } } },
      hop('RUNNING', 'SUCCEEDED', 'succeed'),
      state('running', 'completed', 'succeed', 'tool', true),
    ]);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => events[0]!.seq + i));
    run.release();
    run.ws.close();
  });

  it('calls an HTTP webhook tool, and fails the call on its error or its timeout', async () => {
    const run = await liveRun();
    const ok = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 5, to: 'acct-1' } });
    expect(ok.body).toMatchObject({ status: 'succeeded', result: { ok: true, echoed: { amount: 5, to: 'acct-1' } } });
    expect(webhookCalls[0]!.headers['x-run-id']).toBe(run.runId);

    webhookBehaviour = (_a, res) => void res.writeHead(500).end('bank down');
    const failed = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 6, to: 'acct-1' } });
    expect(failed.body).toMatchObject({ status: 'failed', error: { code: 'tool_failed', message: expect.stringContaining('HTTP 500') } });

    webhookBehaviour = () => {}; // never answers
    const slow = await invoke(run.token, 'slow.thing', { run_id: run.runId, args: {} });
    expect(slow.body).toMatchObject({ status: 'failed', error: { code: 'tool_timeout' } });
    expect((await (await s.http(`/v1/tool_calls/${slow.body.tool_call_id}`)).json()).status).toBe('timeout');
    run.release();
    run.ws.close();
  });

  it('refuses args that break the input schema, naming the field, and creates no call', async () => {
    const run = await liveRun();
    const res = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 'lots', to: 'x' } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'args.amount' } });
    expect(await types(run.runId, ['tool_call_created'])).toEqual([]);
    run.release();
    run.ws.close();
  });

  it('commits a quick call of a tool without side effects with its end, and a slow one’s open while it runs', async () => {
    await s.http('/v1/tools/register', { method: 'POST', json: { name: 'lookup.slow', kind: 'http', endpoint: webhookUrl, timeout_ms: 5000 } });
    const run = await liveRun();
    const stamps = async (id: string) =>
      (await s.orm.em.fork().execute<{ same: boolean }[]>('SELECT started_at = completed_at AS same FROM tool_calls WHERE tool_call_id = ?', [id]))[0]!.same;
    // One commit: the open's now() is the end's.
    const quick = await invoke(run.token, 'echo', { run_id: run.runId, args: { n: 1 } });
    expect(quick.body.status).toBe('succeeded');
    expect(await stamps(quick.body.tool_call_id)).toBe(true);
    // Past ABC_TOOL_START_DEFER_MS (50 ms), the open commits alone: the call is RUNNING while the tool runs.
    let release!: () => void;
    webhookBehaviour = (_args, res) => void new Promise<void>((r) => (release = r)).then(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true })));
    const slow = invoke(run.token, 'lookup.slow', { run_id: run.runId, args: { n: 2 } });
    await expect.poll(async () => (await s.orm.em.fork().execute<{ status: string }[]>("SELECT status FROM tool_calls WHERE run_id = ? AND tool_name = 'lookup.slow'", [run.runId]))[0]?.status).toBe('RUNNING');
    release();
    const ended = await slow;
    expect(ended.body.status).toBe('succeeded');
    expect(await stamps(ended.body.tool_call_id)).toBe(false);
    // Both logged every hop, in the same order.
    const hops = ['tool_call_created', 'policy_decision', 'tool_dispatched', 'tool_result'];
    const byCall = async (id: string) => (await readEvents(s.orm.em.fork(), { runId: run.runId, types: hops }, '0', 100)).filter((e) => e.payload.tool_call_id === id).map((e) => e.type);
    expect(await byCall(quick.body.tool_call_id)).toEqual(hops);
    expect(await byCall(ended.body.tool_call_id)).toEqual(hops);
    run.release();
    run.ws.close();
  });

  it('acts on no run that has ended, though this core already knows the run', async () => {
    const run = await liveRun();
    expect((await invoke(run.token, 'echo', { run_id: run.runId, args: { n: 1 } })).body.status).toBe('succeeded');
    run.release();
    await run.ws.next('done');
    // An API key may still name the run; the call's own statement finds it ended.
    const late = await invoke(s.key, 'echo', { run_id: run.runId, args: { n: 2 } });
    expect(late.body).toMatchObject({ status: 'failed', error: { code: 'run_ended' } });
    run.ws.close();
  });

  it('checks args against a tool as another core last wrote it, as soon as that core tells this one', async () => {
    const tool = { name: 'schema.moves', kind: 'http', endpoint: webhookUrl, input_schema: { type: 'object', required: ['n'], properties: { n: { type: 'number' } } } };
    expect((await s.http('/v1/tools/register', { method: 'POST', json: tool })).status).toBe(200);
    const run = await liveRun();
    const call = () => invoke(run.token, 'schema.moves', { run_id: run.runId, args: { n: 'one' } });
    expect((await call()).status).toBe(400);
    // Written as another core's registry writes it: not through this core's API.
    await writeTool(s.orm.em.fork(), 'default', {
      name: 'schema.moves', kind: 'http', version: '1.0.1', description: null, inputSchema: { type: 'object', required: ['n'], properties: { n: { type: 'string' } } },
      outputSchema: null, timeoutMs: 2000, permissionLevel: 'PUBLIC', sideEffect: false, endpoint: webhookUrl, metadata: null,
    });
    await expect.poll(async () => (await call()).body.status).toBe('succeeded');
    run.release();
    run.ws.close();
  });

  it('returns the same call for a repeated idempotency key, and a conflict for other args', async () => {
    const run = await liveRun();
    const first = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 7, to: 'a' }, idempotency_key: 'pay-7-a' });
    const again = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 7, to: 'a' }, idempotency_key: 'pay-7-a' });
    expect(again.body).toEqual(first.body);
    expect(webhookCalls).toHaveLength(1);
    const conflict = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 8, to: 'a' }, idempotency_key: 'pay-7-a' });
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.code).toBe('idempotency_conflict');
    // Racing repeats make one call too.
    const racing = await Promise.all(
      [1, 2, 3].map(() => invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 9, to: 'b' }, idempotency_key: 'pay-9-b' })),
    );
    expect(racing.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(new Set(racing.map((r) => r.body.tool_call_id)).size).toBe(1);
    expect(webhookCalls).toHaveLength(2);
    // With no key, the default {run}:{tool}:{args hash} makes an identical repeat idempotent too.
    const d1 = await invoke(run.token, 'echo', { run_id: run.runId, args: { n: 1 } });
    const d2 = await invoke(run.token, 'echo', { run_id: run.runId, args: { n: 1 } });
    expect(d2.body.tool_call_id).toBe(d1.body.tool_call_id);
    run.release();
    run.ws.close();
  });
});

describe('recovery', () => {
  it('runs a server call left DISPATCHED by a core that died before starting it, once', async () => {
    const run = await liveRun();
    // What a crash between the dispatch commit and the start leaves behind.
    await s.orm.em.fork().execute(
      `INSERT INTO tool_calls (tool_call_id, run_id, tool_name, kind, status, args, timeout_ms, deadline_at, created_at)
       VALUES ('tc_stranded', ?, 'payments.transfer', 'http', 'DISPATCHED', '{"amount": 3, "to": "z"}', 2000, now() + interval '1 minute', now() - interval '10 seconds')`,
      [run.runId],
    );
    const done = await (await s.http('/v1/tool_calls/tc_stranded:wait?timeout_ms=5000', { method: 'POST' })).json();
    expect(done).toMatchObject({ status: 'succeeded', result: { ok: true, echoed: { amount: 3, to: 'z' } } });
    await new Promise((r) => setTimeout(r, 300));
    expect(webhookCalls).toHaveLength(1);
    run.release();
    run.ws.close();
  });
});

describe('policy', () => {
  it('blocks a call, recording the rule that decided it', async () => {
    const run = await liveRun();
    const res = await invoke(run.token, 'db.delete', { run_id: run.runId, args: { table: 'users' } });
    expect(res.body).toMatchObject({ status: 'failed', error: { code: 'blocked', message: expect.stringContaining('deletes are forbidden') } });
    expect(webhookCalls).toHaveLength(0);
    const decision = (await readEvents(s.orm.em.fork(), { runId: run.runId, types: ['policy_decision'] }, '0', 10))[0]!;
    expect(decision.payload).toMatchObject({ decision: 'block', rule_id: 'no-deletes' });
    run.release();
    run.ws.close();
  });

  it('reloads without a restart, and keeps the old policy when the new file is broken', async () => {
    const run = await liveRun();
    await writeFile(policyFile, JSON.stringify({ ...POLICY, rules: [{ id: 'no-echo', tools: ['echo'], decision: 'block' }, ...POLICY.rules] }));
    await expect.poll(async () => (await invoke(run.token, 'echo', { run_id: run.runId, args: { t: Date.now() } })).body.status, { timeout: 5000, interval: 200 }).toBe('failed');
    await writeFile(policyFile, '{"version": 1, "rules": [], "default": "perhaps"}');
    await new Promise((r) => setTimeout(r, 1500));
    expect((await invoke(run.token, 'echo', { run_id: run.runId, args: { t: 'still blocked' } })).body.status).toBe('failed');
    await writeFile(policyFile, JSON.stringify(POLICY));
    await expect.poll(async () => (await invoke(run.token, 'echo', { run_id: run.runId, args: { t: Date.now() } })).body.status, { timeout: 5000, interval: 200 }).toBe('succeeded');
    run.release();
    run.ws.close();
  });
});

describe('approvals', () => {
  it('withdraws the approvals of a run that was cancelled: approving is refused and the tool never runs', async () => {
    const run = await liveRun();
    const pending = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 900, to: 'acct-7' } });
    expect(pending.body.status).toBe('pending');
    const asked = await run.ws.next('approval_required');
    expect((await s.http(`/v1/runs/${run.runId}:cancel`, { method: 'POST', json: { reason: 'changed my mind' } })).status).toBe(200);
    const late = await decide(asked.approval_id, 'approve', 'u1');
    expect(late.status).toBe(412);
    expect((await late.json()).error).toMatchObject({ code: 'run_ended', details: { status: 'CANCELLED' } });
    const approvals = await approvalsOf(run.runId);
    expect(approvals[0]).toMatchObject({ status: 'EXPIRED', decided_by: 'system' });
    await new Promise((r) => setTimeout(r, 300));
    expect(webhookCalls).toHaveLength(0);
    run.release();
    run.ws.close();
  });

  it('pauses on an args condition, asks the client, and on approve runs the tool once and resumes', async () => {
    const run = await liveRun();
    const pending = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 500, to: 'acct-9' } });
    expect(pending.body).toMatchObject({ status: 'pending', reason: 'waiting_approval' });
    const asked = await run.ws.next('approval_required');
    expect(asked).toMatchObject({ run_id: run.runId, tool_call_id: pending.body.tool_call_id, tool_name: 'payments.transfer', args_summary: 'payments.transfer(amount: 500, to: "acct-9")' });
    expect(await runStatus(run.runId)).toBe('PAUSED_WAITING_APPROVAL');
    expect(webhookCalls).toHaveLength(0);

    const waiting = s.http(`/v1/tool_calls/${pending.body.tool_call_id}:wait?timeout_ms=10000`, { method: 'POST', key: run.token }).then((r) => r.json());
    run.ws.send({ type: 'approval_decision', run_id: run.runId, approval_id: asked.approval_id, decision: 'approve', reason: 'checked' });
    const done = await waiting;
    expect(done).toMatchObject({ status: 'succeeded', result: { ok: true } });
    expect(webhookCalls).toHaveLength(1);
    expect(await runStatus(run.runId)).toBe('RUNNING');
    expect(await types(run.runId, ['approval_created', 'approval_decision', 'run_state'])).toEqual(['approval_created', 'run_state', 'approval_decision', 'run_state']);
    // The whole log from the call on, each move in order: the request's and the decision's moves each commit in one append.
    const log = (await readEvents(s.orm.em.fork(), { runId: run.runId }, '0', 1000)).map((e) => (e.type === 'execution_state' ? `${e.type}:${e.payload.to_status}` : e.type === 'tool_call_state' ? `${e.type}:${e.payload.to}` : e.type));
    expect(log.slice(log.indexOf('tool_call_created'))).toEqual([
      'tool_call_created', 'policy_decision', 'tool_call_state:POLICY_CHECKED', 'execution_state:running', 'execution_state:waiting',
      'approval_created', 'tool_call_state:WAITING_APPROVAL', 'execution_state:running', 'execution_state:waiting', 'run_state',
      'execution_state:running', 'execution_state:completed', 'approval_decision', 'tool_call_state:APPROVED', 'execution_state:running', 'run_state',
      'tool_dispatched', 'tool_call_state:RUNNING', 'tool_result', 'tool_call_state:SUCCEEDED', 'execution_state:completed',
    ]);
    const again = await decide(asked.approval_id, 'approve', 'u1');
    expect(again.status).toBe(409);
    expect((await again.json()).error.code).toBe('approval_conflict');
    await new Promise((r) => setTimeout(r, 300));
    expect(webhookCalls).toHaveLength(1);
    run.release();
    run.ws.close();
  });

  it('holds an approval made under an older policy version for its arguments', async () => {
    const run = await liveRun();
    const pending = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 300, to: 'acct-5' } });
    const asked = await run.ws.next('approval_required');
    const [decision] = (await readEvents(s.orm.em.fork(), { runId: run.runId, types: ['policy_decision'] }, '0', 10)).map((e) => e.payload);
    expect(decision).toMatchObject({ rule_id: 'big-transfers', policy_version: 1 });
    // Version 2 would block transfers outright; it decides calls made after it, not the one a human is deciding.
    await writeFile(policyFile, JSON.stringify({ ...POLICY, version: 2, rules: [{ id: 'no-transfers', tools: ['payments.transfer'], decision: 'block' }] }));
    await new Promise((r) => setTimeout(r, 1200));
    const later = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 1, to: 'acct-6' } });
    expect(later.body).toMatchObject({ status: 'failed', error: { code: 'blocked' } });
    const waiting = s.http(`/v1/tool_calls/${pending.body.tool_call_id}:wait?timeout_ms=10000`, { method: 'POST', key: run.token }).then((r) => r.json());
    run.ws.send({ type: 'approval_decision', run_id: run.runId, approval_id: asked.approval_id, decision: 'approve' });
    expect(await waiting).toMatchObject({ status: 'succeeded' });
    expect(webhookCalls.map((c) => c.args)).toEqual([{ amount: 300, to: 'acct-5' }]);
    await writeFile(policyFile, JSON.stringify(POLICY));
    await new Promise((r) => setTimeout(r, 1200));
    run.release();
    run.ws.close();
  });

  it('warns when a resume finds execution contracts of the run still waiting', async () => {
    const run = await liveRun();
    const pending = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 700, to: 'acct-3' } });
    const asked = await run.ws.next('approval_required');
    // An inconsistency the resumer must notice: a contract of this run waiting on nothing ABC knows.
    await s.orm.em.fork().execute(
      `INSERT INTO execution_contracts (execution_id, tenant_id, session_id, run_id, subject_id, action_type, action_summary, status) VALUES ('exe_orphan', 'default', ?, ?, 'nothing', 'ecs_request', 'orphan', 'waiting')`,
      [run.sessionId, run.runId],
    );
    const waiting = s.http(`/v1/tool_calls/${pending.body.tool_call_id}:wait?timeout_ms=10000`, { method: 'POST', key: run.token }).then((r) => r.json());
    run.ws.send({ type: 'approval_decision', run_id: run.runId, approval_id: asked.approval_id, decision: 'approve' });
    expect((await waiting).status).toBe('succeeded');
    // Seed 001 §9.1: the approved call was dispatched, and the log says so.
    const hops = await types(run.runId, ['approval_decision', 'tool_dispatched', 'tool_result']);
    expect(hops.slice(hops.indexOf('approval_decision'))).toEqual(['approval_decision', 'tool_dispatched', 'tool_result']);
    const [warning] = await readEvents(s.orm.em.fork(), { runId: run.runId, types: ['execution_alignment_warning'] }, '0', 10);
    expect(warning!.payload).toMatchObject({ expected_waiting: 0, actual_waiting: 1 });
    expect(await runStatus(run.runId)).toBe('RUNNING');
    run.release();
    run.ws.close();
  });

  it('fails the call with rejected when the user rejects over HTTP', async () => {
    const run = await liveRun('bob');
    const pending = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 900, to: 'x' } });
    const [approval] = await approvalsOf(run.runId, 'status=PENDING');
    const stranger = await decide(approval.approval_id, 'approve', 'mallory');
    expect(stranger.status).toBe(403);
    const res = await decide(approval.approval_id, 'reject', 'bob', 'too much');
    const decided = (await res.json()).approval;
    expect(decided).toMatchObject({ status: 'REJECTED', decided_by: 'user:bob', reason: 'too much' });
    // The answer is the approval as written: as a later read shows it.
    expect(decided).toEqual((await approvalsOf(run.runId))[0]);
    const call = await (await s.http(`/v1/tool_calls/${pending.body.tool_call_id}`)).json();
    expect(call).toMatchObject({ status: 'rejected', error: { code: 'rejected' } });
    expect(webhookCalls).toHaveLength(0);
    run.release();
    run.ws.close();
  });

  it('refuses to approve a call whose arguments are no longer those the approval was asked for', async () => {
    const run = await liveRun('erin');
    const pending = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 400, to: 'acct-1' } });
    const [approval] = await approvalsOf(run.runId, 'status=PENDING');
    // Written behind ABC's back: the human was shown 400 to acct-1.
    await s.orm.em.fork().execute(`UPDATE tool_calls SET args = '{"amount": 40000, "to": "acct-666"}' WHERE tool_call_id = ?`, [pending.body.tool_call_id]);
    const res = await decide(approval.approval_id, 'approve', 'erin');
    expect(res.status).toBe(412);
    expect((await res.json()).error).toMatchObject({ code: 'approval_args_mismatch' });
    expect((await approvalsOf(run.runId))[0]).toMatchObject({ status: 'PENDING', decided_by: null });
    expect((await (await s.http(`/v1/tool_calls/${pending.body.tool_call_id}`)).json()).status).toBe('waiting_approval');
    await new Promise((r) => setTimeout(r, 300));
    expect(webhookCalls).toHaveLength(0);
    run.release();
    run.ws.close();
  });

  it('pauses a run once for two calls waiting on approvals, and resumes it when both are decided', async () => {
    const run = await liveRun('fay');
    const first = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 500, to: 'acct-a' } });
    const second = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 600, to: 'acct-b' } });
    expect([first.body.status, second.body.status]).toEqual(['pending', 'pending']);
    expect(await runStatus(run.runId)).toBe('PAUSED_WAITING_APPROVAL');
    // Both approvals are recorded in the run's log; the run paused once, and the log has no gap where the second pause was not logged.
    expect((await types(run.runId, ['approval_created', 'run_state'])).sort()).toEqual(['approval_created', 'approval_created', 'run_state']);
    const seqs = (await readEvents(s.orm.em.fork(), { runId: run.runId }, '0', 1000)).map((e) => Number(e.seq));
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    const approvals = (await approvalsOf(run.runId, 'status=PENDING')) as { approval_id: string }[];
    expect(approvals).toHaveLength(2);
    expect((await decide(approvals[0]!.approval_id, 'approve', 'fay')).status).toBe(200);
    expect(await runStatus(run.runId)).toBe('PAUSED_WAITING_APPROVAL');
    expect((await decide(approvals[1]!.approval_id, 'approve', 'fay')).status).toBe(200);
    expect(await runStatus(run.runId)).toBe('RUNNING');
    await expect.poll(() => webhookCalls.map((c) => c.args.to).sort()).toEqual(['acct-a', 'acct-b']);
    run.release();
    run.ws.close();
  });

  it('resumes a run whose two approvals are decided at the same time', async () => {
    const run = await liveRun('gus');
    await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 700, to: 'acct-c' } });
    await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 800, to: 'acct-d' } });
    const approvals = (await approvalsOf(run.runId, 'status=PENDING')) as { approval_id: string }[];
    // The run's row is held, from connections of the test's own, until both decisions wait for it: neither has committed when the other counts the calls still held.
    const [holder, watcher] = [new pg.Client({ connectionString: s.orm.config.get('clientUrl') }), new pg.Client({ connectionString: s.orm.config.get('clientUrl') })];
    await Promise.all([holder.connect(), watcher.connect()]);
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM runs WHERE run_id = $1 FOR UPDATE', [run.runId]);
    const deciding = Promise.all(approvals.map((a) => decide(a.approval_id, 'approve', 'gus')));
    const waiting = async () => (await watcher.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%abc_decide_call%'`)).rows[0].n;
    await expect.poll(waiting, { timeout: 10_000 }).toBe(2);
    await holder.query('COMMIT');
    const answers = await deciding;
    await Promise.all([holder.end(), watcher.end()]);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    // The second counts the calls after the first's commit: it sees none held, and resumes the run once.
    expect(await runStatus(run.runId)).toBe('RUNNING');
    expect((await types(run.runId, ['run_state'])).length).toBe(2);
    await expect.poll(() => webhookCalls.map((c) => c.args.to).sort()).toEqual(['acct-c', 'acct-d']);
    run.release();
    run.ws.close();
  });

  it('lets exactly one of two racing decisions win', async () => {
    const run = await liveRun('carol');
    await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 300, to: 'y' } });
    const [approval] = await approvalsOf(run.runId);
    const results = await Promise.all(['approve', 'reject', 'approve'].map((decision) => decide(approval.approval_id, decision, 'carol')));
    expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409]);
    const winner = (await approvalsOf(run.runId))[0].status;
    await new Promise((r) => setTimeout(r, 300));
    expect(webhookCalls).toHaveLength(winner === 'APPROVED' ? 1 : 0);
    run.release();
    run.ws.close();
  });
});

describe('listing approvals', () => {
  it("pages a run's and a session's approvals oldest first, and refuses a bad limit or cursor on both surfaces", async () => {
    const run = await liveRun('dana');
    const calls = [];
    for (let i = 0; i < 5; i++) {
      const pending = await invoke(run.token, 'payments.transfer', { run_id: run.runId, args: { amount: 200 + i, to: `acct-${i}` } });
      expect(pending.body.status).toBe('pending');
      calls.push(pending.body.tool_call_id);
    }
    const list = async (query: string) => (await s.http(`/v1/approvals?${query}`)).json();
    const whole = (await list(`run_id=${run.runId}`)).approvals;
    expect(whole.map((a: { tool_call_id: string }) => a.tool_call_id)).toEqual(calls);
    for (const filter of [`run_id=${run.runId}`, `session_id=${run.sessionId}&status=PENDING`]) {
      const pages = [];
      let cursor = '';
      for (;;) {
        const page = await list(`${filter}&limit=2${cursor && `&cursor=${encodeURIComponent(cursor)}`}`);
        pages.push(page.approvals.map((a: { approval_id: string }) => a.approval_id));
        if (!page.has_more) break;
        cursor = page.next_cursor;
      }
      expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
      expect(pages.flat()).toEqual(whole.map((a: { approval_id: string }) => a.approval_id));
    }
    for (const query of ['limit=0', 'limit=1001', 'limit=two', 'cursor=not-a-cursor', 'cursor=99999999999999999999_apr']) {
      const res = await s.http(`/v1/approvals?run_id=${run.runId}&${query}`);
      expect(res.status, query).toBe(400);
      expect((await res.json()).error.code).toBe('invalid_request');
    }
    const grpc = (req: Partial<ListApprovalsRequest>) =>
      failure(unary(s.clients.approvals.listApprovals.bind(s.clients.approvals), { sessionId: '', runId: run.runId, status: ApprovalStatus.APPROVAL_STATUS_UNSPECIFIED, ticket: '', limit: 0, cursor: '', ...req }, withKey(s.key)));
    for (const req of [{ limit: -1 }, { limit: 1001 }, { cursor: 'not-a-cursor' }]) expect((await grpc(req)).code).toBe(status.INVALID_ARGUMENT);
    run.release();
    run.ws.close();
  });
});

// Seed 004's worked example, through ABC's real APIs: an e-mail send that needs
// confirmation. The confirmation (ecs_request) is suspended and resumed; then
// the irreversible send runs and completes.
describe('the seed 004 worked example', () => {
  it('records the confirmation and the send as execution contracts, field by field', async () => {
    const reg = await s.http('/v1/tools/register', { method: 'POST', json: { name: 'email.send', kind: 'http', endpoint: webhookUrl, side_effect: true } });
    expect(reg.status).toBe(200);
    const run = await liveRun();
    const pending = await invoke(run.token, 'email.send', { run_id: run.runId, args: { to: 'bob@example.com', subject: 'Meeting' } });
    expect(pending.body.status).toBe('pending');
    const asked = await run.ws.next('approval_required');

    // Suspended: the confirmation waits, and so does the send it guards.
    const during = await (await s.http(`/api/execution/${run.sessionId}/timeline`)).json();
    // The agent's call came first; the policy then asked for the confirmation.
    const [send, ecs] = during.contracts;
    expect(ecs).toMatchObject({
      action_type: 'ecs_request', current_status: 'waiting', is_terminal: false, is_stable: true, is_resumable: true,
      has_side_effects: false, transition_count: 2, last_actor: 'ecs_node', last_trigger: 'suspend',
    });
    expect(send).toMatchObject({
      action_type: 'tool_call', action_summary: 'email.send → bob@example.com', current_status: 'waiting', is_stable: true, is_resumable: true,
      has_side_effects: true, irreversible: true, transition_count: 2, last_actor: 'ecs_node', last_trigger: 'suspend',
    });
    expect(during).toMatchObject({ total_contracts: 2, terminal_contracts: 0, active_contracts: 2, has_suspended: true, ended_at: null });

    const waiting = s.http(`/v1/tool_calls/${pending.body.tool_call_id}:wait?timeout_ms=10000`, { method: 'POST', key: run.token }).then((r) => r.json());
    run.ws.send({ type: 'approval_decision', run_id: run.runId, approval_id: asked.approval_id, decision: 'approve' });
    expect((await waiting).status).toBe('succeeded');

    const t = await (await s.http(`/api/execution/${run.sessionId}/timeline`)).json();
    const rows = (id: string) => t.transitions.filter((x: { execution_id: string }) => x.execution_id === id)
      .map((x: Record<string, unknown>) => [x.sequence_number, `${x.from_status}→${x.to_status}`, x.trigger, x.actor, x.actor_category, x.is_terminal_transition]);
    expect(rows(ecs.execution_id)).toEqual([
      [0, 'pending→running', 'start', 'ecs_node', 'system', false],
      [1, 'running→waiting', 'suspend', 'ecs_node', 'system', false],
      [2, 'waiting→running', 'resume', 'graph_runner', 'system', false],
      [3, 'running→completed', 'succeed', 'graph_runner', 'system', true],
    ]);
    expect(rows(send.execution_id)).toEqual([
      [0, 'pending→running', 'start', 'ecs_node', 'system', false],
      [1, 'running→waiting', 'suspend', 'ecs_node', 'system', false],
      [2, 'waiting→running', 'resume', 'graph_runner', 'system', false],
      [3, 'running→completed', 'succeed', 'tool_node', 'tool', true],
    ]);
    const sendAfter = t.contracts.find((c: { execution_id: string }) => c.execution_id === send.execution_id);
    expect(t).toMatchObject({ total_contracts: 2, terminal_contracts: 2, active_contracts: 0, has_suspended: false, has_irreversible_completed: true, started_at: send.created_at, ended_at: sendAfter.entered_at });

    const c = await (await s.http(`/api/execution/${run.sessionId}/consequences`)).json();
    expect(c.views).toEqual([
      expect.objectContaining({ execution_id: send.execution_id, action_summary: 'email.send → bob@example.com', consequence_label: 'SUCCESS', has_side_effects: true, was_suspended: true, is_still_pending: false }),
      expect.objectContaining({ execution_id: ecs.execution_id, action_type: 'ecs_request', consequence_label: 'SUCCESS', has_side_effects: false, was_suspended: true, is_still_pending: false }),
    ]);
    // A human approved the send: seed 004's marker says so.
    expect(c.prompt_text).toMatch(/^\[SUCCESS ⚠️ IRREVERSIBLE \(human-confirmed\)\] email\.send → bob@example\.com: \{"ok":true/);
    expect(JSON.stringify(c)).not.toContain(send.idempotency_key);
    // The same views for the run alone.
    expect(await (await s.http(`/v1/runs/${run.runId}/consequences`)).json()).toEqual(c);

    // Metrics see the call and its approval wait.
    const toolStats = (await (await s.http('/v1/metrics/tools')).json()).tools.find((x: { tool_name: string }) => x.tool_name === 'email.send');
    expect(toolStats).toMatchObject({ total: 1, succeeded: 1, failed: 0, success_rate: 1 });
    expect(toolStats.p95_approval_wait_ms).toBeGreaterThan(0);
    expect((await (await s.http('/v1/metrics/runs?agent_id=worker')).json()).total).toBeGreaterThan(0);

    // Each finished contract left an execution_fact in the session's memory.
    const facts = await s.orm.em.fork().execute<{ value: Record<string, unknown> }[]>("SELECT value FROM memory WHERE scope = 'SESSION' AND scope_id = ? ORDER BY key", [run.sessionId]);
    expect(facts.map((f) => f.value)).toEqual(expect.arrayContaining([
      expect.objectContaining({ type: 'execution_fact', execution_id: send.execution_id, action_summary: 'email.send → bob@example.com', final_status: 'completed', irreversible: true, error_summary: null }),
      expect.objectContaining({ type: 'execution_fact', execution_id: ecs.execution_id, final_status: 'completed', irreversible: false }),
    ]));
    expect(facts.find((f) => f.value.execution_id === send.execution_id)!.value.duration_ms).toBeGreaterThanOrEqual(0);

    // execution_state events, in order, on the run's log; SSE resumes after Last-Event-ID.
    const replay = (await (await s.http(`/v1/runs/${run.runId}/events?types=execution_state`)).json()).events;
    expect(replay.map((e: { payload: Record<string, string> }) => `${e.payload.execution_id === ecs.execution_id ? 'ecs' : 'send'}:${e.payload.trigger}`))
      .toEqual(['ecs:start', 'ecs:suspend', 'send:start', 'send:suspend', 'ecs:resume', 'ecs:succeed', 'send:resume', 'send:succeed']);
    expect(replay[1].payload).toEqual({
      execution_id: ecs.execution_id, action_summary: ecs.action_summary, from_status: 'running', to_status: 'waiting', trigger: 'suspend',
      actor_category: 'system', is_terminal: false, is_resumable: true, has_side_effects: false, timestamp: expect.any(Number),
    });
    const controller = new AbortController();
    const res = await s.http(`/v1/runs/${run.runId}/events/stream?types=execution_state`, { signal: controller.signal, headers: { 'last-event-id': replay[2].cursor } });
    const rest = await readSse(res, replay.length - 3, controller);
    expect(rest.map((e) => JSON.parse(e.data).event_id)).toEqual(replay.slice(3).map((e: { event_id: string }) => e.event_id));
    // Clients that do not want execution_state leave it out: replay, and IM frames on resume.
    const without = (await (await s.http(`/v1/runs/${run.runId}/events?exclude_types=execution_state`)).json()).events;
    expect(without.length).toBeGreaterThan(0);
    expect(without.some((e: { type: string }) => e.type === 'execution_state')).toBe(false);
    const executionFrames = async (exclude: string[]) => {
      const ws = await new WsClient(s.url).open();
      ws.send({ type: 'hello', api_key: s.key, user_id: 'u1', exclude_events: exclude });
      await ws.next('hello_ack');
      ws.send({ type: 'resume', session_id: run.sessionId, cursor: '0' });
      await ws.next('approval_required');
      await new Promise((r) => setTimeout(r, 200));
      ws.close();
      return ws.frames.filter((f) => f.type === 'state' && f.state === 'execution_state');
    };
    const seen = await executionFrames([]);
    expect(seen.map((f) => f.detail.execution_state.trigger)).toEqual(['start', 'suspend', 'start', 'suspend', 'resume', 'succeed', 'resume', 'succeed']);
    expect(await executionFrames(['execution_state'])).toEqual([]);

    run.release();
    await run.ws.next('done');

    // The next invocation in the session is told what happened, without raw results to parse.
    agent.behave(async (_inv, res) => {
      sse(res, 'done', { usage: {} });
      res.end();
    });
    const before = run.ws.frames.length;
    run.ws.send({ type: 'agent_invoke', session_id: run.sessionId, agent_id: 'worker', message: { role: 'user', content: 'did it go out?' } });
    await run.ws.next('done', before);
    const told = agent.invocations.at(-1)!.body.context as { execution_consequences: { views: { action_summary: string }[]; prompt_text: string } };
    expect(told.execution_consequences.views.map((v) => v.action_summary)).toEqual(['email.send → bob@example.com', ecs.action_summary]);
    expect(told.execution_consequences.prompt_text).toBe(c.prompt_text);
    expect(JSON.stringify(told)).not.toContain(send.idempotency_key);
    run.ws.close();
  });
});
