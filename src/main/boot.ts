// Shared boot steps of the composition roots.
import { format } from 'node:util';
import { logVerbosity, setLogger, setLogVerbosity } from '@grpc/grpc-js';
import { ApiKeys, loadOrMintDevKey } from '../access/api-keys.js';
import { loadOrMintSecretKey, SecretBox } from '../access/secret-box.js';
import { formatProblems, loadConfig, type Config } from '../config.js';
import { createLogger, type Logger } from '../runtime/log.js';
import { openDatabase } from '../store/database.js';
import { createOrm, type Orm } from '../store/orm.js';
import type { Lifecycle } from './lifecycle.js';

/** Loads the configuration or exits with one line per bad variable. */
export function configOrExit(env: NodeJS.ProcessEnv = process.env): Config {
  const result = loadConfig(env);
  if (result.ok) return result.config;
  process.stderr.write(`${formatProblems(result.problems)}\n`);
  process.exit(2);
}

/** The process's logger; grpc-js's own messages go through it too, so every line is one JSON object. */
export function rootLogger(config: Config): Logger {
  const log = createLogger(config.logLevel);
  const grpc = log.child({ component: 'grpc' });
  setLogger({
    error: (...args: unknown[]) => grpc.error(format(...args)),
    info: (...args: unknown[]) => grpc.info(format(...args)),
    debug: (...args: unknown[]) => grpc.debug(format(...args)),
  });
  // grpc-js filters by its own verbosity before it calls the logger: its errors, and everything at debug.
  setLogVerbosity(config.logLevel === 'debug' || config.logLevel === 'trace' ? logVerbosity.DEBUG : logVerbosity.ERROR);
  return log;
}

/**
 * Opens the database (embedded when DATABASE_URL is unset) and the ORM,
 * registering both for shutdown. `join`: a short-lived command that may use
 * the embedded database an `abc serve` already runs.
 */
export async function openStore(config: Config, log: Logger, lifecycle: Lifecycle, join = false): Promise<Orm> {
  const db = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, logger: log, join });
  lifecycle.add('database', db.stop);
  const orm = await createOrm({ url: db.url, logger: log, poolIdleMs: config.dbPoolIdleMs });
  lifecycle.add('orm', () => orm.close());
  return orm;
}

/**
 * Stores the bootstrap keys of ABC_API_KEYS. With none configured, uses the
 * development key from $ABC_DATA_DIR/dev-api-key, minting and printing it once.
 */
export async function bootstrapKeys(config: Config, orm: Orm, log: Logger): Promise<void> {
  const keys = new ApiKeys(orm);
  for (const key of config.apiKeys) await keys.register(key, 'bootstrap');
  if (config.apiKeys.length > 0) return;
  const dev = await loadOrMintDevKey(config.dataDir);
  await keys.register(dev.key, 'development');
  if (dev.minted) {
    process.stdout.write(`\nABC development API key (shown once, saved to ${config.dataDir}/dev-api-key):\n  ${dev.key}\n\n`);
  } else {
    log.info({ file: `${config.dataDir}/dev-api-key` }, 'using the development API key');
  }
}

/** The box that seals secrets at rest: ABC_SECRET_KEY, else a key kept in $ABC_DATA_DIR/secret-key. */
export async function secretBox(config: Config, log: Logger): Promise<SecretBox> {
  if (config.secretKey) return new SecretBox(config.secretKey);
  const { key, minted } = await loadOrMintSecretKey(config.dataDir);
  if (minted) log.info({ file: `${config.dataDir}/secret-key` }, 'minted the key that seals agent tokens; set ABC_SECRET_KEY to share one key between cores');
  return new SecretBox(key);
}
