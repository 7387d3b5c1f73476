// `abc serve` as a real child process: embedded PostgreSQL, /ready, SIGTERM, no orphans.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import { chmod, chown, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { exited, postgresProcesses, run, waitForLog } from '../support/process.js';

describe('abc serve', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it('starts embedded PostgreSQL, serves /ready, and stops cleanly on SIGTERM', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'abc-serve-'));
    dirs.push(dataDir);
    const child = run(['serve'], { ABC_DATA_DIR: dataDir, ABC_HTTP_ADDR: '127.0.0.1:0', ABC_GRPC_ADDR: '127.0.0.1:0', ABC_GATEWAY_THREAD: 'true' });
    let stdout = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    const ready = await waitForLog(child, 'ABC is ready');
    expect(ready.gatewayThread).toBe(true);
    const http = ready.http as string;

    const res = await fetch(`${http}/ready`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ready' });
    expect(postgresProcesses(path.join(dataDir, 'pg'))).not.toEqual([]);

    // The development key was minted, printed once and saved.
    const key = readFileSync(path.join(dataDir, 'dev-api-key'), 'utf8').trim();
    expect(key).toMatch(/^abc_/);
    expect(stdout).toContain(key);
    // Both threads log at once: every line still arrives whole.
    await Promise.all(Array.from({ length: 300 }, () => fetch(`${http}/v1/agents`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.arrayBuffer())));

    // An admin command uses the embedded database this serve runs, instead of failing to start another.
    const minting = run(['keys', 'create', '--name', 'ops', '--scopes', 'operator'], { ABC_DATA_DIR: dataDir, LOG_LEVEL: 'warn' });
    let minted = '';
    minting.stdout!.on('data', (c: Buffer) => (minted += c.toString()));
    expect(await exited(minting)).toBe(0);
    expect((await fetch(`${http}/v1/agents`, { headers: { authorization: `Bearer ${minted.trim()}` } })).status).toBe(200);
    expect(postgresProcesses(path.join(dataDir, 'pg')).length).toBeGreaterThan(0);

    child.kill('SIGTERM');
    expect(await exited(child)).toBe(0);
    const logLines = stdout.split('\n').filter((line) => line.startsWith('{'));
    expect(logLines.length).toBeGreaterThan(300);
    for (const line of logLines) expect(() => JSON.parse(line)).not.toThrow();
    expect(postgresProcesses(path.join(dataDir, 'pg'))).toEqual([]);
    expect(existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
    await expect(fetch(`${http}/health`)).rejects.toThrow();
    // The gateway thread's access log reached stdout before the exit.
    expect(stdout.split('\n').some((line) => line.includes('"msg":"request"') && line.includes('"url":"/ready"'))).toBe(true);

    // A second start, with the gateway inline, reuses the data and the key, and does not print the key again.
    const again = run(['serve'], { ABC_DATA_DIR: dataDir, ABC_HTTP_ADDR: '127.0.0.1:0', ABC_GRPC_ADDR: '127.0.0.1:0', ABC_GATEWAY_THREAD: 'false' });
    let stdout2 = '';
    again.stdout!.on('data', (c: Buffer) => (stdout2 += c.toString()));
    const ready2 = await waitForLog(again, 'ABC is ready');
    expect(ready2.gatewayThread).toBe(false);
    expect((await fetch(`${ready2.http as string}/ready`)).status).toBe(200);
    expect(stdout2).not.toContain(key);
    again.kill('SIGINT');
    expect(await exited(again)).toBe(0);
    expect(postgresProcesses(path.join(dataDir, 'pg'))).toEqual([]);
  }, 120_000);

  // As root the first test covers the root path; this one covers an ordinary user.
  // (Not as root, the first test already is the ordinary-user path.)
  it.runIf(process.getuid?.() === 0)('also runs as an ordinary user', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'abc-serve-user-'));
    dirs.push(dataDir);
    await chmod(dataDir, 0o755);
    await chown(dataDir, Number(execFileSync('id', ['-u', 'postgres']).toString()), Number(execFileSync('id', ['-g', 'postgres']).toString()));
    const child = run(['serve'], { ABC_DATA_DIR: path.join(dataDir, 'abc'), ABC_HTTP_ADDR: '127.0.0.1:0', ABC_GRPC_ADDR: '127.0.0.1:0' }, 'postgres');
    const ready = await waitForLog(child, 'ABC is ready');
    expect((await fetch(`${ready.http as string}/ready`)).status).toBe(200);
    // Signal ABC itself (runuser's child), so its own exit code is what runuser reports.
    process.kill(Number(execFileSync('pgrep', ['-P', String(child.pid)]).toString().trim()), 'SIGTERM');
    expect(await exited(child)).toBe(0);
    expect(postgresProcesses(path.join(dataDir, 'abc', 'pg'))).toEqual([]);
  }, 120_000);

  it('exits with 1, stopping PostgreSQL, when the gateway thread cannot listen', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'abc-serve-busy-'));
    dirs.push(dataDir);
    const busy = net.createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    const child = run(['serve'], { ABC_DATA_DIR: dataDir, ABC_HTTP_ADDR: `127.0.0.1:${(busy.address() as AddressInfo).port}`, ABC_GRPC_ADDR: '127.0.0.1:0', ABC_GATEWAY_THREAD: 'true' });
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    expect(await exited(child)).toBe(1);
    const port = (busy.address() as AddressInfo).port;
    busy.close();
    // One line, no stack.
    expect(stderr).toBe(`abc serve: cannot listen on 127.0.0.1:${port}: the address is in use (set ABC_HTTP_ADDR or ABC_GRPC_ADDR to another port)\n`);
    expect(postgresProcesses(path.join(dataDir, 'pg'))).toEqual([]);
  }, 120_000);

  it('refuses to start with a bad configuration, naming the variable', async () => {
    const child = run(['serve'], { ABC_HTTP_ADDR: '127.0.0.1:70000', DATABASE_URL: 'mysql://x/y' });
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    expect(await exited(child)).toBe(2);
    expect(stderr).toContain('ABC_HTTP_ADDR: port must be 0-65535');
    expect(stderr).toContain('DATABASE_URL: must use postgres://');
  });

  it('rejects an unknown command with usage', async () => {
    const child = run(['frobnicate'], {});
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    expect(await exited(child)).toBe(2);
    expect(stderr).toMatch(/unknown command "frobnicate"[\s\S]*usage: abc/);
  });
});
