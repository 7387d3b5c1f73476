// The MikroORM instance and the migrator. One ORM per process, passed in; never a module singleton.
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { MikroORM, type EntityManager } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import type { Logger } from '../runtime/log.js';
import { entities } from './entities/index.js';
import { migrations } from './migrations/index.js';

export type Orm = MikroORM;

/** How long any pool waits for a new connection to the database. */
export const CONNECT_TIMEOUT_MS = 5000;

export interface OrmOptions {
  url: string;
  logger?: Logger;
  /** A schema to use instead of `public` (tests isolate files this way). */
  schema?: string;
  poolMax?: number;
  /** How long an idle connection stays open (0: until the pool ends); unset, pg's default of 10 s. */
  poolIdleMs?: number;
}

export async function createOrm(opts: OrmOptions): Promise<Orm> {
  return MikroORM.init({
    clientUrl: opts.url,
    entities,
    schema: opts.schema,
    extensions: [Migrator],
    migrations: {
      migrationsList: migrations,
      tableName: 'abc_migrations',
      snapshot: false,
      snapshotOnMigrate: false,
      silent: true,
      schema: opts.schema,
    },
    pool: { max: opts.poolMax ?? 10, idleTimeoutMillis: opts.poolIdleMs },
    // A connect that hangs (a database that is away but not refusing) fails, as database_unavailable, instead of waiting forever.
    // A Unix socket named by libpq's `host` parameter (`?host=/run/postgresql`) wins over the URL's host, as in libpq.
    driverOptions: { connectionTimeoutMillis: CONNECT_TIMEOUT_MS, ...socketOf(opts.url) },
    debug: false,
    allowGlobalContext: false,
    ensureDatabase: false,
    discovery: { checkDuplicateTableNames: true },
    // Functions are written by hand in migrations (the event append); the entity diff leaves them be.
    schemaGenerator: { ignoreRoutines: true },
    loggerFactory: undefined,
  });
}

function socketOf(url: string): { host?: string } {
  const host = new URL(url).searchParams.get('host');
  return host?.startsWith('/') ? { host } : {};
}

/** How long the ORM's idle connections stay open, for the core's other pools to keep alike. */
export const poolIdleMs = (orm: Orm): number | undefined => orm.config.get('pool')?.idleTimeoutMillis;

/** Applies pending migrations; returns the names applied (empty when up to date). */
export async function migrate(orm: Orm): Promise<string[]> {
  const applied = await orm.migrator.up();
  return applied.map((m) => m.name);
}

/** Names of migrations not applied yet. */
export async function pendingMigrations(orm: Orm): Promise<string[]> {
  return (await orm.migrator.getPending()).map((m) => m.name);
}

/** Whether `error` is a unique-constraint violation (a duplicate insert). */
export const isUniqueViolation = (error: unknown): boolean => error instanceof UniqueConstraintViolationException;

const rawForks = new WeakMap<Orm, EntityManager>();

/**
 * The EntityManager for raw statements (`execute`, `transactional`): one fork
 * of the ORM, shared. Code that only sends SQL loads no entities, so there is
 * no identity map to keep apart, and a transaction forks its own. Entity reads
 * and writes take a fork of their own.
 */
export function rawEm(orm: Orm): EntityManager {
  let em = rawForks.get(orm);
  if (!em) rawForks.set(orm, (em = orm.em.fork()));
  return em;
}
