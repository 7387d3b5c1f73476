// ABC_DB_POOL_IDLE_MS: how long the ORM's and the read-only pool's idle connections stay open.
import type pg from 'pg';
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

  /** The ORM's pool and a read-only pool that takes its idle time, as a core makes them; both end after `work`. */
  async function withPools(idleMs: number, work: (pools: pg.Pool[]) => Promise<void>): Promise<void> {
    const orm = await createOrm({ url: db.url, poolIdleMs: idleMs });
    const readOnly = readOnlyPool(db.url, 2, poolIdleMs(orm));
    try {
      await work([await nativePool(orm), readOnly]);
    } finally {
      await readOnly.end();
      await orm.close();
    }
  }

  it('closes an idle connection once its idle time has passed', async () => {
    await withPools(100, async (pools) => {
      await Promise.all(pools.map((p) => p.query('SELECT 1')));
      expect(pools.map((p) => p.totalCount)).toEqual([1, 1]);
      await vi.waitFor(() => expect(pools.map((p) => p.totalCount)).toEqual([0, 0]), { timeout: 5000, interval: 50 });
    });
  });

  it('hands 0 to pg, which then keeps idle connections until the pool ends', async () => {
    await withPools(0, async (pools) => {
      // Dropped on the way, 0 would become pg's default of 10 s.
      expect(pools.map((p) => (p as pg.Pool & { options: pg.PoolConfig }).options.idleTimeoutMillis)).toEqual([0, 0]);
      const backend = async () => (await pools[0]!.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const first = await backend();
      await pools[1]!.query('SELECT 1');
      await new Promise((r) => setTimeout(r, 300));
      expect(pools.map((p) => p.totalCount)).toEqual([1, 1]);
      expect(await backend()).toBe(first);
    });
  });
});
