// PostgreSQL goes away mid-stream and comes back: ABC answers 503 meanwhile, keeps
// its connections bounded, serves again within seconds, and every live watcher
// gets every frame exactly once.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeys } from '../../src/access/api-keys.js';
import { startCore, type Core } from '../../src/main/core.js';
import { ensureDatabase } from '../../src/store/database.js';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../src/store/embedded-pg.js';
import { createOrm, migrate, type Orm } from '../../src/store/orm.js';
import { startGateway, type Gateway } from '../../gateway/server.js';
import { FAST_RETRY, coreOptions } from '../support/core.js';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { WsClient } from '../support/gateway.js';
import { testLogger } from '../support/log.js';

const DELTAS = 300;
let dir: string;
let cluster: EmbeddedDatabase;
let port: number;
let orm: Orm;
let core: Core;
let gateway: Gateway;
let agent: FakeAgent;
let key: string;

// Durable, as in production: an ephemeral test cluster (synchronous_commit=off) loses the last commits when its postmaster is killed.
const startCluster = async () => (cluster = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), logger: testLogger(), port }));
const postmasterPid = () => Number(readFileSync(path.join(dir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
const sockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap' || r === 'TCPWRAP').length;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'abc-outage-'));
  port = 20000 + Math.floor(Math.random() * 20000);
  await startCluster();
  await ensureDatabase(cluster.adminUrl, 'abc');
  orm = await createOrm({ url: cluster.url('abc'), poolMax: 6 });
  await migrate(orm);
  key = (await new ApiKeys(orm).create('test')).key;
  core = await startCore(coreOptions(orm, { retry: FAST_RETRY, drainTimeoutMs: 1000, contracts: { workers: 0 } }));
  gateway = await startGateway({ coreAddr: core.address, host: '127.0.0.1', port: 0, logger: testLogger() });
  agent = await startFakeAgent(async (_inv, res) => {
    for (let i = 0; i < DELTAS; i++) {
      sse(res, 'delta', { text: `${i} ` });
      await new Promise((r) => setTimeout(r, 30));
    }
    sse(res, 'done', { usage: {} });
    res.end();
  });
  const reg = await fetch(`${gateway.url}/v1/agents/register`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ agent_id: 'slow', name: 'Slow', endpoint: agent.url }),
  });
  expect(reg.status).toBe(200);
});

afterAll(async () => {
  await agent?.close();
  await gateway?.close();
  await core?.close();
  await orm?.close();
  await cluster?.stop();
  await rm(dir, { recursive: true, force: true });
});

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('a PostgreSQL outage', () => {
  it('answers 503 while the database is away and loses no frame once it is back', async () => {
    const ws = await new WsClient(gateway.url).open();
    ws.send({ type: 'hello', user_id: 'u1', api_key: key });
    await ws.next('hello_ack');
    ws.send({ type: 'agent_invoke', session_id: 'sess_outage', agent_id: 'slow', message: { role: 'user', content: 'go' } });
    await ws.until(() => ws.text().split(' ').length > 10);
    const runId = ws.of('delta')[0]!.run_id as string;
    const baseline = sockets();

    process.kill(postmasterPid(), 'SIGKILL');
    const down = Date.now();
    let most = 0;
    const sampler = setInterval(() => (most = Math.max(most, sockets())), 50);

    const ready = await until('/ready to refuse', async () => {
      const res = await fetch(`${gateway.url}/ready`);
      return res.status === 503 ? res.json() : undefined;
    }, 5000);
    expect(ready).toMatchObject({ status: 'not_ready' });
    const refused = await until('a 503 from a database read', async () => {
      const res = await fetch(`${gateway.url}/v1/runs/${runId}`, { headers: { authorization: `Bearer ${key}` } });
      expect([200, 503]).toContain(res.status);
      return res.status === 503 ? ((await res.json()) as { error: Record<string, unknown> }) : undefined;
    }, 5000);
    expect(refused.error).toMatchObject({ code: 'database_unavailable', retryable: true, category: 'INTERNAL' });

    await new Promise((r) => setTimeout(r, Math.max(0, 5000 - (Date.now() - down))));
    await startCluster();
    const back = Date.now();
    await until('/ready again', async () => ((await fetch(`${gateway.url}/ready`)).status === 200 ? true : undefined), 10_000);
    const recoveredInMs = Date.now() - back;
    clearInterval(sampler);

    // The pools (6 + the read-only pool's 4 + the listener) bound what may be open at once.
    expect(most - baseline).toBeLessThanOrEqual(12);
    expect(recoveredInMs).toBeLessThan(10_000);
    console.info(`outage: ready again ${recoveredInMs} ms after the database returned; at most ${most - baseline} sockets above the baseline`);

    // The rest of the stream, under whatever load the machine is under.
    await ws.until((f) => f.some((x) => x.type === 'done' || x.type === 'error'), 30_000);
    expect(ws.of('error')).toEqual([]);
    expect(ws.text()).toBe(Array.from({ length: DELTAS }, (_, i) => `${i} `).join(''));
    const run = (await (await fetch(`${gateway.url}/v1/runs/${runId}`, { headers: { authorization: `Bearer ${key}` } })).json()) as { run: { status: string } };
    expect(run.run.status).toBe('DONE');
    ws.close();
  }, 60_000);
});
