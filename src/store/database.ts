// Resolves where the database lives: DATABASE_URL, or an embedded cluster in $ABC_DATA_DIR/pg.
import path from 'node:path';
import pg from 'pg';
import type { Logger } from '../runtime/log.js';
import { runningCluster, startEmbeddedPostgres } from './embedded-pg.js';

export interface DatabaseHandle {
  url: string;
  embedded: boolean;
  /** Stops the embedded cluster; a no-op for an external database. */
  stop(): Promise<void>;
}

export const EMBEDDED_DATABASE = 'abc';

/**
 * Connects to DATABASE_URL, or starts the embedded cluster and makes sure the
 * `abc` database exists. With `join`, a short-lived command uses the embedded
 * cluster another ABC (`abc serve`) already runs from the data directory.
 */
export async function openDatabase(opts: { databaseUrl?: string; dataDir: string; logger: Logger; join?: boolean }): Promise<DatabaseHandle> {
  if (opts.databaseUrl) return { url: opts.databaseUrl, embedded: false, stop: async () => {} };
  const running = opts.join ? await runningCluster(path.join(opts.dataDir, 'pg')) : undefined;
  if (running) return { url: running.url(EMBEDDED_DATABASE), embedded: true, stop: async () => {} };
  const cluster = await startEmbeddedPostgres({ dataDir: path.join(opts.dataDir, 'pg'), logger: opts.logger });
  try {
    await ensureDatabase(cluster.adminUrl, EMBEDDED_DATABASE);
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  return { url: cluster.url(EMBEDDED_DATABASE), embedded: true, stop: cluster.stop };
}

/** Creates a database when it does not exist yet. */
export async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) await client.query(`CREATE DATABASE "${name.replaceAll('"', '""')}"`);
  } finally {
    await client.end();
  }
}
