// A workflow turn whose tool call waits on an approval survives its core:
// the core is killed while the approval is pending and restarted; once the
// approval is given the turn goes on, the tool runs exactly once, the turn is
// counted once, and the run ends with the phase's answer.
import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../gateway/server.js';
import { readEvents } from '../../src/store/event-log.js';
import { chunk, startFakeLlm, type FakeLlm } from '../support/fake-llm.js';
import { migratedOrm } from '../support/db.js';
import { testLogger } from '../support/log.js';
import { startCoreProcess } from '../support/process.js';
import { WsClient } from '../support/gateway.js';
import { freePort } from '../support/ports.js';

const KEY = 'abc_workflow_restart_key_0123456789';

let store: Awaited<ReturnType<typeof migratedOrm>>;
let gateway: Gateway;
let model: FakeLlm;
let bank: http.Server;
let corePort: number;
let dir: string;
let core: ChildProcess | undefined;
let transfers = 0;
/** The model's answers: a tool call, or text. */
const script: ({ tool: string; args: Record<string, unknown> } | { text: string })[] = [];


const startCore = (policyFile: string) =>
  startCoreProcess({ DATABASE_URL: store.db.url, ABC_API_KEYS: KEY, ABC_GRPC_ADDR: `127.0.0.1:${corePort}`, ABC_PUBLIC_URL: gateway.url, ABC_POLICY_FILE: policyFile, LLM_ROUTER_URL: model.url, RUN_LEASE_MS: '400' });

const api = (p: string, init: RequestInit & { json?: unknown } = {}) =>
  fetch(`${gateway.url}${p}`, {
    ...init,
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...(init.headers as Record<string, string>) },
    body: init.json !== undefined ? JSON.stringify(init.json) : init.body,
  });

let policyFile: string;

beforeAll(async () => {
  store = await migratedOrm();
  dir = await mkdtemp(path.join(os.tmpdir(), 'abc-wf-restart-'));
  policyFile = path.join(dir, 'policy.json');
  await writeFile(policyFile, JSON.stringify({ version: 1, default: 'allow', rules: [{ id: 'money', tools: ['bank.transfer'], decision: 'require_approval' }] }));
  model = await startFakeLlm((req, res) => {
    const next = script.shift();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const send = (delta: Record<string, unknown>, finish: string | null = null) => res.write(`data: ${JSON.stringify(chunk(req.json.model, delta, finish))}\n\n`);
    if (next && 'tool' in next) {
      send({ tool_calls: [{ index: 0, id: `call_${Math.random()}`, type: 'function', function: { name: next.tool, arguments: JSON.stringify(next.args) } }] });
      send({}, 'tool_calls');
    } else {
      send({ content: next?.text ?? '' });
      send({}, 'stop');
    }
    res.end('data: [DONE]\n\n');
  });
  bank = http.createServer(async (req, res) => {
    for await (const _ of req);
    transfers++;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"receipt":"r-42"}');
  });
  await new Promise<void>((r) => bank.listen(0, '127.0.0.1', r));
  corePort = await freePort();
  gateway = await startGateway({ coreAddr: `127.0.0.1:${corePort}`, host: '127.0.0.1', port: 0, logger: testLogger() });
  core = await startCore(policyFile);
  const bankUrl = `http://127.0.0.1:${(bank.address() as AddressInfo).port}`;
  expect((await api('/v1/tools/register', { method: 'POST', json: { name: 'bank.transfer', kind: 'http', endpoint: bankUrl, side_effect: true } })).status).toBe(200);
  const workflow = {
    workflow_id: 'payments',
    version: '1.0.0',
    initial_phase: 'pay',
    phases: [{ id: 'pay', instructions: 'Pay the bill the user names.', model: 'gpt-4o-mini', tools: { allowed: ['bank.transfer'], tool_choice: 'auto' } }],
    transitions: [],
  };
  expect((await api('/v1/workflows', { method: 'POST', json: workflow })).status).toBe(201);
});
afterAll(async () => {
  core?.kill('SIGTERM');
  if (core && core.exitCode === null) await new Promise((r) => core!.once('exit', r));
  bank?.closeAllConnections();
  bank?.close();
  await gateway?.close();
  await model?.close();
  await store?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('a workflow turn waiting on an approval when its core is killed', () => {
  it('goes on after a restart and the approval, runs the tool once and counts the turn once', async () => {
    const ws = await new WsClient(gateway.url).open();
    ws.send({ type: 'hello', api_key: KEY, user_id: 'u1' });
    const session = `sess_wf_restart_${Date.now()}`;
    // Before the kill the model asks for the transfer; the resumed turn asks the model again, which asks again.
    script.push({ tool: 'bank_transfer', args: { amount: 250, to: 'acct-7' } }, { tool: 'bank_transfer', args: { amount: 250, to: 'acct-7' } }, { text: 'Paid, receipt r-42.' });
    ws.send({ type: 'agent_invoke', session_id: session, agent_id: 'workflow:payments', message: { role: 'user', content: 'Pay the electricity bill.' } });
    const asked = await ws.next('approval_required');
    const runId = asked.run_id as string;

    core!.kill('SIGKILL');
    await new Promise((r) => core!.once('exit', r));
    core = await startCore(policyFile);
    await expect.poll(async () => (await fetch(`${gateway.url}/ready`)).status, { timeout: 10_000, interval: 100 }).toBe(200);

    const decided = await api(`/v1/approvals/${asked.approval_id}:decide`, { method: 'POST', json: { decision: 'approve' }, headers: { 'x-user-id': 'u1' } });
    expect(decided.status).toBe(200);
    const run = async () => ((await (await api(`/v1/runs/${runId}`)).json()) as { run: { status: string; error?: unknown } }).run;
    await expect.poll(async () => ['DONE', 'FAILED', 'CANCELLED'].includes((await run()).status), { timeout: 30_000, interval: 100 }).toBe(true);
    // A run that failed says why, and shows its log.
    const ended = await run();
    const log = ended.status === 'DONE' ? [] : (await readEvents(store.orm.em.fork(), { runId }, '0', 1000)).map((e) => `${e.type} ${e.type.startsWith('run_') || e.type.startsWith('agent_invoke') ? JSON.stringify(e.payload) : ''}`);
    expect({ status: ended.status, error: ended.error, log }).toEqual({ status: 'DONE', error: null, log: [] });

    expect(transfers).toBe(1);
    const events = await readEvents(store.orm.em.fork(), { runId }, '0', 1000);
    expect(events.filter((e) => e.type === 'approval_created')).toHaveLength(1);
    // The proxy records its llm_call_done off the response path: it may land after run_done.
    expect(events.find((e) => e.type === 'run_done')).toMatchObject({ payload: { final_message: 'Paid, receipt r-42.', detail: { workflow_id: 'payments', phase: 'pay', status: 'in_progress' } } });
    expect(events.some((e) => e.type === 'agent_invoke_retry' && e.payload.resume === true)).toBe(true);
    const [row] = await store.orm.em.fork().execute<{ phase_turns: Record<string, number> }[]>('SELECT phase_turns FROM workflow_sessions WHERE session_id = ?', [session]);
    expect(row!.phase_turns).toEqual({ pay: 1 });
    ws.close();
  }, 60_000);
});
