// The ORM's own pg pool, for hot paths: a statement goes to PostgreSQL as a
// named prepared statement, with no query builder or hydration in between.
import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type pg from 'pg';
import type { Orm } from './orm.js';

/** What a hot path needs of a pool (the ORM bundles its own copy of pg). */
export interface Queryable {
  query<R>(config: { name?: string; text: string; values?: unknown[] }): Promise<{ rows: R[] }>;
}

/** The pool the ORM itself draws from. */
export async function nativePool(orm: Orm): Promise<pg.Pool> {
  return poolOfEm(orm.em);
}

const emPools = new WeakMap<object, Promise<pg.Pool>>();

/** The pool an EntityManager's connection draws from. */
function poolOfEm(em: EntityManager): Promise<pg.Pool> {
  const connection = em.getDriver().getConnection() as unknown as { getNativeClient(): Promise<pg.Pool> };
  let pool = emPools.get(connection);
  if (!pool) emPools.set(connection, (pool = connection.getNativeClient()));
  return pool;
}

const pools = new WeakMap<Orm, Queryable>();

/** The ORM's pool as a `Queryable`, at hand without awaiting it. */
export function poolOf(orm: Orm): Queryable {
  const known = pools.get(orm);
  if (known) return known;
  const native = nativePool(orm);
  const pool: Queryable = { query: async <R>(config: { name?: string; text: string; values?: unknown[] }) => queryNamed<R>(await native, config) };
  pools.set(orm, pool);
  return pool;
}

/**
 * `sql`, written with `?` placeholders as for the ORM, as a prepared statement:
 * each connection parses and plans it once.
 */
export function prepared(sql: string): { name: string; text: string } {
  let statement = statements.get(sql);
  if (!statement) {
    let n = 0;
    const text = sql.replace(/\?/g, () => `$${++n}`);
    statement = { name: `abc_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`, text };
    statements.set(sql, statement);
  }
  return statement;
}

/**
 * `column` is one of a JSON array of texts, the statement's next parameter, as
 * an index condition. `column IN (SELECT jsonb_array_elements_text(?))` is a
 * join with a set the planner takes for 100 rows, which it may answer by
 * reading the whole table, at a cost that grows with the table; here the list
 * is one value, and the column's index finds each row.
 */
export const inJsonList = (column: string): string => `${column} = ANY(ARRAY(SELECT jsonb_array_elements_text(?::jsonb)))`;

/**
 * Runs one statement written for `em.execute`: outside a transaction, on the
 * ORM's pool as a prepared statement (the SQL's parameters must each take
 * their type from where they stand); inside one, through the transaction.
 */
export async function executeOne<R>(em: EntityManager, sql: string, params: unknown[]): Promise<R[]> {
  if (em.isInTransaction()) return em.execute<R[]>(sql, params);
  return (await queryNamed<R>(await poolOfEm(em), { ...prepared(sql), values: params })).rows;
}

/** The name each statement goes by now, when a migration made its first one stale (see queryNamed). */
const renamed = new Map<string, string>();
let renames = 0;

/**
 * Runs `config` on `pool`. A migration that changes what a prepared statement
 * returns (a column added to a table it reads with `*` or `RETURNING *`, by
 * another core or `abc migrate`) makes every connection that prepared it
 * refuse it from then on, before running it (SQLSTATE 0A000, "cached plan
 * must not change result type"). The statement then goes by a new name, which
 * each connection prepares afresh, and runs again once.
 */
async function queryNamed<R>(pool: pg.Pool, config: { name?: string; text: string; values?: unknown[] }): Promise<{ rows: R[] }> {
  const first = config.name;
  if (!first) return pool.query(config) as unknown as Promise<{ rows: R[] }>;
  const name = renamed.get(first) ?? first;
  try {
    return (await pool.query({ ...config, name })) as unknown as { rows: R[] };
  } catch (error) {
    if ((error as { code?: string }).code !== '0A000') throw error;
    if ((renamed.get(first) ?? first) === name) renamed.set(first, `${first}_${++renames}`);
    return (await pool.query({ ...config, name: renamed.get(first)! })) as unknown as { rows: R[] };
  }
}

/** Whether PostgreSQL answered `error` with a SQLSTATE: the statement's own transaction rolled back, and nothing of it committed. */
export const refusedByServer = (error: unknown): boolean => /^[0-9A-Z]{5}$/.test(String((error as { code?: unknown })?.code ?? ''));

/** Whether a statement refused with SQLSTATE ABC01: a row was not in the state its write expects, and nothing was written. */
export const isGuardRefusal = (error: unknown): boolean => (error as { code?: string }).code === 'ABC01';

/**
 * `executeOne` for a statement guarded by the state it expects (a one-call
 * commit): undefined when it refused with SQLSTATE ABC01, having written nothing.
 */
export async function executeGuarded<R>(em: EntityManager, sql: string, params: unknown[]): Promise<R[] | undefined> {
  try {
    return await executeOne<R>(em, sql, params);
  } catch (error) {
    if (isGuardRefusal(error)) return undefined;
    throw error;
  }
}

/** Statements by their source text; callers build few distinct texts. */
const statements = new Map<string, { name: string; text: string }>();
