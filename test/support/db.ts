// An isolated database per test file, on the run's shared PostgreSQL.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import { ensureDatabase } from '../../src/store/database.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { nativePool } from '../../src/store/native.js';
import { createOrm, migrate, type Orm } from '../../src/store/orm.js';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

export function databaseUrl(name: string): string {
  const url = new URL(inject('pgAdminUrl'));
  url.pathname = `/${name}`;
  return url.toString();
}

/** Creates an empty database named abc_test_<random>. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `abc_test_${randomBytes(6).toString('hex')}`;
  await ensureDatabase(inject('pgAdminUrl'), name);
  return {
    name,
    url: databaseUrl(name),
    drop: async () => {
      const client = new pg.Client({ connectionString: inject('pgAdminUrl') });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

/** A fresh, migrated database and its ORM. */
export async function migratedOrm(): Promise<{ orm: Orm; db: TestDatabase; close(): Promise<void> }> {
  const db = await createTestDatabase();
  const orm = await createOrm({ url: db.url, poolMax: 4 });
  await migrate(orm);
  return {
    orm,
    db,
    close: async () => {
      await orm.close();
      await db.drop();
    },
  };
}

/** How many runs a session has. */
export async function countRuns(orm: Orm, sessionId: string): Promise<number> {
  const [row] = await orm.em.fork().execute<{ n: number }[]>('SELECT count(*)::int AS n FROM runs WHERE session_id = ?', [sessionId]);
  return row!.n;
}

/**
 * EntityManagers of `orm` that note each statement they send into `calls`:
 * through the ORM, or on its pool as a prepared statement (store/native.ts).
 */
export async function statementCounter(orm: Orm): Promise<(calls: string[]) => EntityManager> {
  let counting: string[] = [];
  const pool = await nativePool(orm);
  const query = pool.query.bind(pool) as (...a: unknown[]) => unknown;
  pool.query = ((config: { text: string }, ...rest: unknown[]) => {
    counting.push(config.text);
    return query(config, ...rest);
  }) as typeof pool.query;
  return (calls) => {
    counting = calls;
    const fork = orm.em.fork();
    const execute = fork.execute.bind(fork) as (...a: unknown[]) => unknown;
    fork.execute = ((sql: string, ...rest: unknown[]) => {
      calls.push(sql);
      return execute(sql, ...rest);
    }) as EntityManager['execute'];
    return fork;
  };
}

/**
 * A migrated database for this test file, opened before its tests and closed
 * after them: forks of its ORM (`em`), and forks whose statements are counted
 * into `calls` (`counted`, see statementCounter).
 */
export function countedDatabase(): { em(): EntityManager; counted(calls: string[]): EntityManager; orm(): Orm } {
  let store: Awaited<ReturnType<typeof migratedOrm>> | undefined;
  let counter: ((calls: string[]) => EntityManager) | undefined;
  beforeAll(async () => {
    store = await migratedOrm();
    counter = await statementCounter(store.orm);
  });
  afterAll(async () => store?.close());
  return { em: () => store!.orm.em.fork(), counted: (calls) => counter!(calls), orm: () => store!.orm };
}
