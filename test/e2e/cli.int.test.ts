// The abc command against an external database: migrate, keys create, core.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeys } from '../../src/access/api-keys.js';
import { createOrm } from '../../src/store/orm.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';

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
