// `abc serve` killed with SIGKILL while runs stream starts again; `npm start` passes SIGTERM on.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { WsClient } from '../support/gateway.js';
import { exited, postgresProcesses, ROOT, run, waitForLog } from '../support/process.js';

const dirs: string[] = [];
let agent: FakeAgent | undefined;
afterAll(async () => {
  await agent?.close();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

const env = (dataDir: string) => ({ ABC_DATA_DIR: dataDir, ABC_HTTP_ADDR: '127.0.0.1:0', ABC_GRPC_ADDR: '127.0.0.1:0' });
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !check(); await new Promise((r) => setTimeout(r, 100))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
  }
}
/** The watchdog that stops an embedded postmaster whose ABC died. */
const watchdogs = (dataDir: string) => {
  try {
    return execFileSync('pgrep', ['-f', `${dataDir}/pg/postmaster.pid`]).toString().trim().split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
};

/** Starts a run whose agent streams until the test ends, and waits for its first deltas. */
async function streamARun(http: string, key: string): Promise<WsClient> {
  agent ??= await startFakeAgent(async (_inv, res) => {
    for (let i = 0; i < 10_000 && !res.destroyed; i++) {
      sse(res, 'delta', { text: `${i} ` });
      await new Promise((r) => setTimeout(r, 20));
    }
    res.end();
  });
  const reg = await fetch(`${http}/v1/agents/register`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ agent_id: 'streamer', name: 'Streamer', endpoint: agent.url }),
  });
  expect(reg.status).toBe(200);
  const ws = await new WsClient(http).open();
  ws.ws.on('error', () => {});
  ws.send({ type: 'hello', user_id: 'u1', api_key: key });
  await ws.next('hello_ack');
  ws.send({ type: 'agent_invoke', session_id: `sess_${Date.now()}`, agent_id: 'streamer', message: { role: 'user', content: 'go' } });
  await ws.until((f) => f.filter((x) => x.type === 'delta').length >= 5);
  return ws;
}

describe('after kill -9', () => {
  it('abc serve starts again on the same data directory, and its PostgreSQL does not outlive it', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'abc-crash-'));
    dirs.push(dataDir);
    const pgDir = path.join(dataDir, 'pg');

    // 1. ABC and its watchdog die together: the postmaster is left as an orphan.
    const first = run(['serve'], env(dataDir));
    const ready = await waitForLog(first, 'ABC is ready');
    const key = readFileSync(path.join(dataDir, 'dev-api-key'), 'utf8').trim();
    await streamARun(ready.http as string, key);
    const orphans = postgresProcesses(pgDir);
    expect(orphans).not.toEqual([]);
    for (const pid of [first.pid!, ...watchdogs(dataDir)]) process.kill(pid, 'SIGKILL');
    await exited(first);
    expect(postgresProcesses(pgDir)).not.toEqual([]);

    // A new ABC finds the orphan, stops it safely and starts.
    const second = run(['serve'], env(dataDir));
    const ready2 = await waitForLog(second, 'ABC is ready');
    expect((await fetch(`${ready2.http as string}/ready`)).status).toBe(200);
    await streamARun(ready2.http as string, key);

    // 2. ABC alone dies: its watchdog stops PostgreSQL within seconds.
    process.kill(second.pid!, 'SIGKILL');
    await exited(second);
    await until('the postmaster to stop', () => postgresProcesses(pgDir).length === 0);
    expect(watchdogs(dataDir)).toEqual([]);

    const third = run(['serve'], env(dataDir));
    const ready3 = await waitForLog(third, 'ABC is ready');
    expect((await fetch(`${ready3.http as string}/ready`)).status).toBe(200);
    third.kill('SIGTERM');
    expect(await exited(third)).toBe(0);
    expect(postgresProcesses(pgDir)).toEqual([]);
  }, 150_000);

  it('refuses a data directory that a live ABC owns', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'abc-owned-'));
    dirs.push(dataDir);
    const owner = run(['serve'], env(dataDir));
    await waitForLog(owner, 'ABC is ready');
    const intruder = run(['serve'], env(dataDir));
    let err = '';
    intruder.stderr!.on('data', (c: Buffer) => (err += c.toString()));
    expect(await exited(intruder)).toBe(1);
    // One line, no stack.
    expect(err).toMatch(new RegExp(`^abc serve: .*in use by ABC process ${owner.pid}; stop it first or use another ABC_DATA_DIR\\n$`));
    owner.kill('SIGTERM');
    expect(await exited(owner)).toBe(0);
  }, 120_000);
});

describe('SIGTERM while the database is down', () => {
  it('still stops abc serve within its grace period', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'abc-down-'));
    dirs.push(dataDir);
    const child = run(['serve'], { ...env(dataDir), ABC_SHUTDOWN_GRACE_MS: '2000' });
    const ready = await waitForLog(child, 'ABC is ready');
    const postmaster = Number(readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
    process.kill(postmaster, 'SIGKILL');
    for (let i = 0; i < 50 && (await fetch(`${ready.http as string}/ready`)).status !== 503; i++) await new Promise((r) => setTimeout(r, 100));
    expect((await fetch(`${ready.http as string}/ready`)).status).toBe(503);
    const stopping = Date.now();
    child.kill('SIGTERM');
    await exited(child);
    expect(Date.now() - stopping).toBeLessThan(20_000);
    expect(postgresProcesses(path.join(dataDir, 'pg'))).toEqual([]);
  }, 90_000);
});

describe('npm start', () => {
  it('passes SIGTERM to ABC, which stops with its PostgreSQL', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'abc-npm-'));
    dirs.push(dataDir);
    const { DATABASE_URL: _omit, ...base } = process.env;
    const npm = spawn('npm', ['start', '--silent'], { cwd: ROOT, env: { ...base, LOG_LEVEL: 'info', ...env(dataDir) }, stdio: ['ignore', 'pipe', 'pipe'] });
    await waitForLog(npm, 'ABC is ready');
    const abc = Number(readFileSync(path.join(dataDir, 'pg', 'abc-owner.pid'), 'utf8'));
    expect(abc).not.toBe(npm.pid);
    npm.kill('SIGTERM');
    await exited(npm);
    await until('ABC to exit', () => !alive(abc));
    await until('PostgreSQL to stop', () => postgresProcesses(path.join(dataDir, 'pg')).length === 0);
  }, 120_000);
});
