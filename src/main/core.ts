// The core: one gRPC server hosting every plane, plus the standard health service.
import { Server, ServerCredentials, type Metadata } from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { ApiKeys, type Principal } from '../access/api-keys.js';
import { unauthenticated } from '../domain/errors.js';
import { bindService } from '../grpc/bind.js';
import type { Logger } from '../log.js';
import { pendingMigrations, type Orm } from '../store/orm.js';
import { services } from './services.js';

export interface Core {
  /** HOST:PORT the server is bound to (the real port when 0 was asked). */
  address: string;
  close(): Promise<void>;
}

export interface CoreOptions {
  orm: Orm;
  log: Logger;
  host: string;
  port: number;
  /** How often to re-check for pending migrations while not serving. */
  migrationPollMs?: number;
  drainTimeoutMs?: number;
}

/**
 * Starts the core gRPC server. Health reports SERVING only while the database
 * schema is up to date, so readiness tells the truth for `abc core` started
 * ahead of `abc migrate`.
 */
export async function startCore(opts: CoreOptions): Promise<Core> {
  const log = opts.log.child({ component: 'core' });
  const keys = new ApiKeys(opts.orm);
  const server = new Server({ 'grpc.max_receive_message_length': 16 * 1024 * 1024 });
  const all = services();
  const health = new HealthImplementation({ '': 'NOT_SERVING', ...Object.fromEntries(all.map((s) => [s.name, 'NOT_SERVING' as const])) });
  health.addToServer(server);

  const authenticate = async (metadata: Metadata): Promise<Principal> => {
    const key = bearer(metadata);
    const principal = key ? await keys.verify(key) : null;
    if (!principal) throw unauthenticated();
    return principal;
  };
  for (const s of all) server.addService(s.definition, bindService(s.definition, s.handlers, { log, authenticate }));

  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${opts.host}:${opts.port}`, ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  const address = `${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`;

  let timer: NodeJS.Timeout | undefined;
  const setServing = (serving: boolean) => {
    const status = serving ? 'SERVING' : 'NOT_SERVING';
    health.setStatus('', status);
    for (const s of all) health.setStatus(s.name, status);
  };
  const checkSchema = async () => {
    try {
      const pending = await pendingMigrations(opts.orm);
      setServing(pending.length === 0);
      if (pending.length === 0) return;
      log.warn({ pending }, 'database has pending migrations; run `abc migrate`');
    } catch (error) {
      setServing(false);
      log.error({ err: error }, 'cannot read migration state');
    }
    timer = setTimeout(checkSchema, opts.migrationPollMs ?? 2000);
    timer.unref();
  };
  await checkSchema();
  log.info({ address }, 'core listening');

  return {
    address,
    close: async () => {
      clearTimeout(timer);
      setServing(false);
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          log.warn('drain timed out; forcing shutdown');
          server.forceShutdown();
          resolve();
        }, opts.drainTimeoutMs ?? 10_000);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
      log.info('core stopped');
    },
  };
}

/** The API key from `authorization: Bearer KEY` or `x-api-key`. */
export function bearer(metadata: Metadata): string | undefined {
  const auth = metadata.get('authorization')[0];
  if (typeof auth === 'string' && /^bearer\s+/i.test(auth)) return auth.replace(/^bearer\s+/i, '').trim();
  const key = metadata.get('x-api-key')[0];
  return typeof key === 'string' ? key : undefined;
}
