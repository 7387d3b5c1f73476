// ABC_DB_POOL_IDLE_MS: how long the ORM's and the read-only pool's idle connections stay open.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { nativePool } from '../../src/store/native.js';
import { createOrm, poolIdleMs } from '../../src/store/orm.js';
import { readOnlyPool } from '../../src/store/read-only.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';

describe('database pools and idle connections', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('closes an idle connection once its idle time has passed', async () => {
    const orm = await createOrm({ url: db.url, poolIdleMs: 100 });
    const readOnly = readOnlyPool(db.url, 2, poolIdleMs(orm));
    try {
      const pool = await nativePool(orm);
      await Promise.all([pool.query('SELECT 1'), readOnly.query('SELECT 1')]);
      expect([pool.totalCount, readOnly.totalCount]).toEqual([1, 1]);
      await vi.waitFor(() => expect([pool.totalCount, readOnly.totalCount]).toEqual([0, 0]), { timeout: 5000, interval: 50 });
    } finally {
      await readOnly.end();
      await orm.close();
    }
  });

  it('keeps idle connections open with 0, until the pool ends', async () => {
    const orm = await createOrm({ url: db.url, poolIdleMs: 0 });
    const readOnly = readOnlyPool(db.url, 2, poolIdleMs(orm));
    try {
      const pool = await nativePool(orm);
      const backend = async () => (await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const first = await backend();
      await readOnly.query('SELECT 1');
      await new Promise((r) => setTimeout(r, 500));
      expect([pool.totalCount, readOnly.totalCount]).toEqual([1, 1]);
      // The same backend answers again: its caches and prepared statements are still warm.
      expect(await backend()).toBe(first);
    } finally {
      await readOnly.end();
      await orm.close();
    }
  });
});
