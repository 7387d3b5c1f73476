// The core is killed while an approval is pending and restarted; the approval is then
// given. The run continues to the end, the tool runs exactly once, and no text repeats.
import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../gateway/server.js';
import { createAgentServer } from '../../sdk/typescript/src/index.js';
import { readEvents } from '../../src/store/event-log.js';
import { migratedOrm } from '../support/db.js';
import { testLogger } from '../support/log.js';
import { startCoreProcess } from '../support/process.js';
import { WsClient } from '../support/gateway.js';
import { freePort } from '../support/ports.js';

const KEY = 'abc_restart_test_key_0123456789';

let store: Awaited<ReturnType<typeof migratedOrm>>;
let gateway: Gateway;
let corePort: number;
let dir: string;
let policyFile: string;
let transfers = 0;
let core: ChildProcess | undefined;
const servers: http.Server[] = [];


const startCore = () =>
  startCoreProcess({ DATABASE_URL: store.db.url, ABC_API_KEYS: KEY, ABC_GRPC_ADDR: `127.0.0.1:${corePort}`, ABC_PUBLIC_URL: gateway.url, ABC_POLICY_FILE: policyFile, RUN_LEASE_MS: '400' });

const api = (p: string, init: RequestInit & { json?: unknown } = {}) =>
  fetch(`${gateway.url}${p}`, {
    ...init,
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...(init.headers as Record<string, string>) },
    body: init.json !== undefined ? JSON.stringify(init.json) : init.body,
  });

beforeAll(async () => {
  store = await migratedOrm();
  dir = await mkdtemp(path.join(os.tmpdir(), 'abc-restart-'));
  policyFile = path.join(dir, 'policy.json');
  await writeFile(policyFile, JSON.stringify({ version: 1, default: 'allow', rules: [{ id: 'money', tools: ['bank.transfer'], decision: 'require_approval' }] }));
  corePort = await freePort();
  gateway = await startGateway({ coreAddr: `127.0.0.1:${corePort}`, host: '127.0.0.1', port: 0, logger: testLogger() });
  core = await startCore();

  const bank = http.createServer(async (req, res) => {
    for await (const _ of req);
    transfers++;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"receipt":"r-42"}');
  });
  const payer = createAgentServer(async (ctx) => {
    ctx.delta('Checking the bill. ');
    const receipt = (await ctx.invokeTool('bank.transfer', { amount: 250, to: 'acct-7' })) as { receipt: string };
    ctx.delta(`Paid, receipt ${receipt.receipt}.`);
    return { finalMessage: `Checking the bill. Paid, receipt ${receipt.receipt}.` };
  });
  const urls: string[] = [];
  for (const server of [bank, payer]) {
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    urls.push(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  }
  expect((await api('/v1/tools/register', { method: 'POST', json: { name: 'bank.transfer', kind: 'http', endpoint: urls[0], side_effect: true } })).status).toBe(200);
  expect((await api('/v1/agents/register', { method: 'POST', json: { agent_id: 'payer', name: 'Payer', endpoint: urls[1] } })).status).toBe(200);
});
afterAll(async () => {
  core?.kill('SIGTERM');
  if (core && core.exitCode === null) await new Promise((r) => core!.once('exit', r));
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
  await gateway.close();
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

describe('a core killed while an approval is pending', () => {
  it('continues the run after a restart, runs the tool once, and repeats no text', async () => {
    const ws = await new WsClient(gateway.url).open();
    ws.send({ type: 'hello', api_key: KEY, user_id: 'u1' });
    ws.send({ type: 'agent_invoke', session_id: `sess_restart_${Date.now()}`, agent_id: 'payer', message: { role: 'user', content: 'pay it' } });
    const asked = await ws.next('approval_required');
    const runId = asked.run_id as string;

    core!.kill('SIGKILL');
    await new Promise((r) => core!.once('exit', r));
    core = await startCore();
    await expect.poll(async () => (await fetch(`${gateway.url}/ready`)).status, { timeout: 10_000, interval: 100 }).toBe(200);

    const decided = await api(`/v1/approvals/${asked.approval_id}:decide`, { method: 'POST', json: { decision: 'approve' }, headers: { 'x-user-id': 'u1' } });
    expect(decided.status).toBe(200);
    await expect.poll(async () => ((await (await api(`/v1/runs/${runId}`)).json()) as { run: { status: string } }).run.status, { timeout: 15_000, interval: 100 }).toBe('DONE');

    expect(transfers).toBe(1);
    const events = await readEvents(store.orm.em.fork(), { runId }, '0', 1000);
    const text = events.filter((e) => e.type === 'agent_stream_delta').map((e) => e.payload.text).join('');
    expect(text).toBe('Checking the bill. Paid, receipt r-42.');
    expect(events.at(-1)).toMatchObject({ type: 'run_done', payload: { final_message: 'Checking the bill. Paid, receipt r-42.' } });
    expect(events.some((e) => e.type === 'agent_invoke_retry' && e.payload.resume === true)).toBe(true);
    ws.close();
  }, 60_000);
});
