// The abc command against an external database: migrate, keys create, agents rm,
// help and version (which start nothing), user errors as one line, and logs that
// are one JSON object per line.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeys } from '../../src/access/api-keys.js';
import { createOrm } from '../../src/store/orm.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { exited, run, waitForLog } from '../support/process.js';
import { registerAgent } from '../../src/store/agent-store.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const abc = (...args: string[]) =>
  promisify(execFile)(process.execPath, [path.join(ROOT, 'bin/abc.js'), ...args], { cwd: ROOT, env: { ...process.env, DATABASE_URL: db.url, LOG_LEVEL: 'warn' } });
/** What a failing command left: its exit code and its output. */
const failed = (...args: string[]) => abc(...args).then(() => { throw new Error(`abc ${args.join(' ')} succeeded`); }, (e: { code: number; stdout: string; stderr: string }) => e);

describe('abc migrate', () => {
  it('applies the migrations to an empty database, then is a no-op', async () => {
    const first = await abc('migrate');
    expect(first.stdout).toMatch(/^applied Migration\d+_initial, /);
    const second = await abc('migrate');
    expect(second.stdout).toBe('schema up to date\n');
  });
});

describe('abc keys create', () => {
  it('mints a key, prints it once, and stores only its hash', async () => {
    const { stdout } = await abc('keys', 'create', '--name', 'ci');
    const key = stdout.trim();
    expect(key).toMatch(/^abc_[A-Za-z0-9_-]{43}$/);
    const orm = await createOrm({ url: db.url, poolMax: 1 });
    try {
      expect(await new ApiKeys(orm).verify(key)).toMatchObject({ kind: 'key', name: 'ci' });
      const rows = await orm.em.fork().execute<{ key_hash: string; prefix: string }[]>('SELECT key_hash, prefix FROM api_keys');
      expect(JSON.stringify(rows)).not.toContain(key);
    } finally {
      await orm.close();
    }
  });

  it('needs a name', async () => {
    const error = await abc('keys', 'create').catch((e) => e);
    expect(error.code).toBe(2);
    expect(error.stderr).toContain('keys create --name NAME');
  });
});

describe('abc portfolios import', () => {
  it('loads the sample portfolios, and re-importing replaces them', async () => {
    const file = path.join(ROOT, 'packs/analyze-portfolio/data/portfolios/sample.json');
    expect((await abc('portfolios', 'import', file)).stdout).toBe('imported 2 portfolio(s): pf-demo-balanced, pf-demo-concentrated\n');
    await abc('portfolios', 'import', file);
    const orm = await createOrm({ url: db.url, poolMax: 1 });
    try {
      const rows = await orm.em.fork().execute<{ n: number }[]>("SELECT count(*)::int AS n FROM portfolio_positions WHERE portfolio_id = 'pf-demo-balanced'");
      expect(rows[0]!.n).toBe(8);
    } finally {
      await orm.close();
    }
  });

  it('needs a file', async () => {
    await expect(abc('portfolios', 'import')).rejects.toMatchObject({ code: 2, stderr: expect.stringContaining('portfolios import FILE') });
  });
});

describe('help and version', () => {
  it('answer at once, for every command, and start nothing', async () => {
    const [general, short, keys, keysFlag, serve, version, bare] = await Promise.all([
      abc('--help'), abc('-h'), abc('help', 'keys'), abc('keys', '--help'), abc('serve', '--help'), abc('--version'), failed(),
    ]);
    expect(general.stdout).toMatch(/^abc \d+\.\d+\.\d+: the control plane for AI agents\n\nusage: abc <command> \[options\]/);
    for (const name of ['serve', 'core', 'gateway', 'migrate', 'tenants', 'keys', 'agents', 'portfolios import FILE']) expect(general.stdout).toContain(`  ${name}`);
    expect(short.stdout).toBe(general.stdout);
    expect(keys.stdout).toMatch(/^usage: abc keys create --name NAME/);
    expect(keysFlag.stdout).toBe(keys.stdout);
    // `serve --help` explains serve; it does not start a server or mint a key.
    expect(serve.stdout).toMatch(/^usage: abc serve\n/);
    expect(serve.stdout).not.toContain('development API key');
    expect(version.stdout).toBe(`abc ${(JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version}\n`);
    expect(bare.code).toBe(2);
    expect(bare.stdout).toContain('usage: abc <command>');
  }, 60_000);
});

describe('user errors', () => {
  it('are one line and an exit code, never a stack', async () => {
    const unknown = await failed('frobnicate');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe('abc frobnicate: unknown command "frobnicate"; abc --help lists them\nusage: abc <command>   (abc help frobnicate for more)\n');
    const flag = await failed('keys', 'create', '--name', 'x', '--bogus');
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/^abc keys: Unknown option '--bogus'/);
    expect(flag.stderr).not.toMatch(/\n\s+at /);

    const busy = net.createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    try {
      const port = (busy.address() as AddressInfo).port;
      const child = run(['gateway', '--core', '127.0.0.1:1'], { ABC_HTTP_ADDR: `127.0.0.1:${port}` });
      let stderr = '';
      child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
      expect(await exited(child)).toBe(1);
      expect(stderr).toBe(`abc gateway: cannot listen on 127.0.0.1:${port}: the address is in use (set ABC_HTTP_ADDR or ABC_GRPC_ADDR to another port)\n`);
    } finally {
      busy.close();
    }
  }, 60_000);
});

describe('abc agents rm', () => {
  it('deregisters an agent of a tenant, and says so when there is none', async () => {
    await abc('migrate');
    const orm = await createOrm({ url: db.url, poolMax: 1 });
    try {
      await registerAgent(orm.em.fork(), { tenantId: 'default', agentId: 'retired', ownerKeyId: null, name: 'Retired', endpoint: 'http://127.0.0.1:9', capabilities: [] });
    } finally {
      await orm.close();
    }
    expect((await abc('agents', 'rm', 'retired')).stdout).toBe('removed agent retired\n');
    const again = await failed('agents', 'rm', 'retired');
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('no agent retired in tenant default');
  }, 60_000);
});

describe('logs', () => {
  it('are one JSON object per line, with no key twice, and name the trace of their request', async () => {
    const child = run(['serve'], { DATABASE_URL: db.url, ABC_HTTP_ADDR: '127.0.0.1:0', ABC_GRPC_ADDR: '127.0.0.1:0', ABC_API_KEYS: 'abc_log_test_key_0123456789abcdef' });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    const ready = await waitForLog(child, 'ABC is ready');
    const trace = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
    await fetch(`${ready.http}/v1/sessions/nope`, { headers: { authorization: 'Bearer wrong', traceparent: `00-${trace}-0123456789abcdef-01` } });
    child.kill('SIGTERM');
    await exited(child);
    const lines = out.split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThan(5);
    // A request's lines name its trace: the caller's traceparent.
    const request = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'request' && String(l.url).startsWith('/v1/sessions/nope'));
    expect(request).toMatchObject({ trace_id: trace });
    for (const line of lines) {
      expect(() => JSON.parse(line), line).not.toThrow();
      const keys = topLevelKeys(line);
      expect(keys.filter((k, i) => keys.indexOf(k) !== i), line).toEqual([]);
    }
  }, 60_000);
});

/** The keys of a JSON line's top-level object as written, duplicates included (JSON.parse keeps only the last). */
function topLevelKeys(line: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
    else if (c === '"') {
      let j = i + 1;
      while (line[j] !== '"') j += line[j] === '\\' ? 2 : 1;
      if (depth === 1 && line[j + 1] === ':') keys.push(line.slice(i + 1, j));
      i = j;
    }
  }
  return keys;
}
