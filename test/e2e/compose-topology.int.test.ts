// deploy/compose.yaml's topology as plain processes on this machine (no
// container engine runs here): the migrate job, two cores and two gateways on
// one PostgreSQL, each with the environment the compose file gives it (host
// names and ports mapped to this machine). A run that waits on an approval,
// the approval, and a contract go through it, across both halves.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrm } from '../../src/store/orm.js';
import { importSamplePortfolios, request } from '../support/contracts.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { WsClient } from '../support/gateway.js';
import { exited } from '../support/process.js';
import { freePort } from '../support/ports.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const KEY = 'abc_compose_topology_key_0123456789abcdef';
const SECRET_KEY = 'ab'.repeat(32);

type Service = { command: string[]; environment: Record<string, string> };
const compose = parse(readFileSync(path.join(ROOT, 'deploy/compose.yaml'), 'utf8'), { merge: true }) as { services: Record<string, Service & { image?: string }> };

let db: TestDatabase;
let agent: FakeAgent;
const children: ChildProcess[] = [];
/** `service:containerPort` of the compose network → `127.0.0.1:hostPort` on this machine. */
const addresses = new Map<string, string>();
const gateways: Record<string, string> = {};


/** The compose file's environment of a service, as this machine runs it. */
function environment(name: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, raw] of Object.entries(compose.services[name]!.environment)) {
    let value = String(raw)
      .replace(/\$\{ABC_API_KEYS[^}]*\}/, KEY)
      .replace(/\$\{ABC_SECRET_KEY[^}]*\}/, SECRET_KEY)
      .replace(/\$\{LLM_ROUTER_URL[^}]*\}/, '');
    if (key === 'DATABASE_URL') value = db.url;
    // A listen address of this service, and the other services it names, become local ports.
    if (/_ADDR$/.test(key)) value = addresses.get(`${name}:${value.split(':').at(-1)}`)!;
    value = value.replace(/\b((?:core|gateway)-\d):(\d+)/g, (_, service: string, port: string) => addresses.get(`${service}:${port}`)!);
    env[key] = value;
  }
  return env;
}

function start(name: string): ChildProcess {
  const service = compose.services[name]!;
  const args = service.command.map((a) => a.replace(/\b((?:core|gateway)-\d):(\d+)/, (_, s: string, p: string) => addresses.get(`${s}:${p}`)!));
  const { DATABASE_URL: _omit, ...base } = process.env;
  if (process.env.COMPOSE_DEBUG) process.stderr.write(`${name}: ${args.join(' ')} ${JSON.stringify(environment(name))}\n`);
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/abc.js'), ...args], { cwd: ROOT, env: { ...base, ...environment(name), LOG_LEVEL: 'warn' }, stdio: ['ignore', process.env.COMPOSE_DEBUG ? 'inherit' : 'ignore', 'inherit'] });
  children.push(child);
  return child;
}

/** Waits for a gateway to answer /ready with 200 (its core serving). */
async function ready(url: string): Promise<void> {
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 200))) {
    if ((await fetch(`${url}/ready`).catch(() => undefined))?.status === 200) return;
  }
  throw new Error(`${url} never became ready`);
}

const api = (gateway: string, p: string, init: RequestInit & { json?: unknown } = {}) =>
  fetch(`${gateways[gateway]}${p}`, {
    ...init,
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...(init.headers as Record<string, string>) },
    body: init.json !== undefined ? JSON.stringify(init.json) : init.body,
  });

beforeAll(async () => {
  db = await createTestDatabase();
  for (const name of ['core-1', 'core-2']) {
    addresses.set(`${name}:50051`, `127.0.0.1:${await freePort()}`);
    addresses.set(`${name}:9464`, `127.0.0.1:${await freePort()}`);
  }
  for (const name of ['gateway-1', 'gateway-2']) {
    addresses.set(`${name}:8080`, `127.0.0.1:${await freePort()}`);
    gateways[name] = `http://${addresses.get(`${name}:8080`)}`;
  }
  // The compose file's order: migrate runs to completion, then the cores and the gateways.
  expect(await exited(start('migrate'))).toBe(0);
  for (const name of ['core-1', 'core-2', 'gateway-1', 'gateway-2']) start(name);
  for (const name of ['gateway-1', 'gateway-2']) await ready(gateways[name]!);
  const orm = await createOrm({ url: db.url, poolMax: 1 });
  await importSamplePortfolios(orm);
  await orm.close();
  agent = await startFakeAgent(async (inv, res) => {
    // The agent calls a tool through the other gateway, and waits through its approval.
    const token = String(inv.headers['x-abc-run-token']);
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const invoked = (await (await fetch(`${gateways['gateway-1']}/v1/tools/echo:invoke`, { method: 'POST', headers, body: JSON.stringify({ run_id: inv.body.run_id, args: { pay: 42 } }) })).json()) as { tool_call_id: string };
    const waited = (await (await fetch(`${gateways['gateway-1']}/v1/tool_calls/${invoked.tool_call_id}:wait?timeout_ms=20000`, { method: 'POST', headers })).json()) as { status: string };
    sse(res, 'delta', { text: `paid: ${waited.status}` });
    sse(res, 'done', { usage: {} });
    res.end();
  });
}, 180_000);

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  await Promise.all(children.map((c) => exited(c)));
  await agent?.close();
  await db?.drop();
});

describe("the compose file's topology", () => {
  it('runs a run that waits on an approval, and a contract, across two gateways and two cores', async () => {
    expect((await api('gateway-1', '/v1/agents/register', { method: 'POST', json: { agent_id: 'payer', name: 'Payer', endpoint: agent.url } })).status).toBe(200);
    expect((await api('gateway-2', '/v1/policy', { method: 'PUT', json: { version: 1, default: 'allow', rules: [{ id: 'ask', tools: ['echo'], decision: 'require_approval' }] } })).status).toBe(200);

    // The run starts on gateway-2 (core-2); its tool call goes through gateway-1 (core-1).
    const ws = await new WsClient(gateways['gateway-2']!).open();
    ws.send({ type: 'hello', api_key: KEY, user_id: 'u1' });
    ws.send({ type: 'agent_invoke', session_id: `sess_compose_${Date.now()}`, agent_id: 'payer', message: { role: 'user', content: 'pay' } });
    const asked = await ws.next('approval_required');
    const decided = await api('gateway-1', `/v1/approvals/${asked.approval_id}:decide`, { method: 'POST', json: { decision: 'approve' }, headers: { 'x-user-id': 'u1' } });
    expect(decided.status).toBe(200);
    const done = await ws.next('done');
    expect(done.final_message).toBe('paid: succeeded');
    ws.close();

    const submitted = await api('gateway-2', '/v1/contracts:submit', { method: 'POST', json: request({ execution_preferences: { mode: 'sync', max_latency_ms: 30_000 } }) });
    expect(submitted.status).toBe(200);
    expect(((await submitted.json()) as { kind: string }).kind).toBe('result');
  }, 120_000);
});
