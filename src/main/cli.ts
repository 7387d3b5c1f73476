#!/usr/bin/env node
// The `abc` command: serve (all-in-one), core, gateway, migrate, keys create.
import { parseArgs } from 'node:util';
import { startGateway } from '../../gateway/server.js';
import { ApiKeys } from '../access/api-keys.js';
import { coreSettings, parseHostPort } from '../config.js';
import { bootstrapKeys, configOrExit, openStore, rootLogger, secretBox } from './boot.js';
import { startCore } from './core.js';
import { startGatewayThread } from './gateway-thread.js';
import { Lifecycle } from './lifecycle.js';
import { loadPacks } from './packs.js';
import { DEFAULT_TOOL_KINDS } from '../execution/tool-kinds.js';
import { migrate } from '../store/orm.js';
import { migratePacks, packDb } from '../store/pack-db.js';

const USAGE = `usage: abc <command>

  serve                     run everything: embedded or external PostgreSQL, core and gateway
  core                      run the core gRPC server on ABC_GRPC_ADDR
  gateway [--core H:P]      run the HTTP/WebSocket gateway on ABC_HTTP_ADDR against a core
  migrate                   apply pending database migrations
  keys create --name NAME   mint an API key and print it once
`;

class UsageError extends Error {}

const [command, ...rest] = process.argv.slice(2);
const config = configOrExit();
const log = rootLogger(config);
const packs = await loadPacks(config.packsDir).catch((error: Error) => {
  process.stderr.write(`ABC_PACKS_DIR ${config.packsDir}: ${error.message}\n`);
  process.exit(2);
});
const packCommands = new Map(packs.flatMap((p) => Object.entries(p.commands ?? {})));
const usage = () => USAGE + [...packCommands.values()].map((c) => `  ${c.usage}\n`).join('');
const lifecycle = new Lifecycle(log);
lifecycle.exitOnSignals();

try {
  switch (command) {
    case 'serve': {
      const orm = await openStore(config, log, lifecycle);
      const applied = await migrate(orm);
      log.info({ applied }, applied.length ? 'migrations applied' : 'schema up to date');
      await bootstrapKeys(config, orm, log);
      const core = await startCore({ orm, log, ...coreSettings(config), secrets: await secretBox(config, log), packs, toolKinds: DEFAULT_TOOL_KINDS });
      lifecycle.add('core', core.close);
      const gatewayOpts = { coreAddr: core.address, ...config.httpAddr, wsPingIntervalMs: config.wsPingIntervalMs };
      const gateway = config.gatewayThread
        ? await startGatewayThread({ ...gatewayOpts, logLevel: config.logLevel }, (error) => {
            log.fatal({ err: error }, 'the gateway thread stopped');
            void lifecycle.stop().then(() => process.exit(1));
          })
        : await startGateway({ ...gatewayOpts, logger: log });
      lifecycle.add('gateway', gateway.close);
      log.info({ http: gateway.url, grpc: core.address, gatewayThread: config.gatewayThread }, 'ABC is ready');
      break;
    }
    case 'core': {
      const orm = await openStore(config, log, lifecycle);
      await bootstrapKeys(config, orm, log);
      const core = await startCore({ orm, log, ...coreSettings(config), secrets: await secretBox(config, log), packs, toolKinds: DEFAULT_TOOL_KINDS });
      lifecycle.add('core', core.close);
      break;
    }
    case 'gateway': {
      const { values } = parseArgs({ args: rest, options: { core: { type: 'string' } } });
      const coreAddr = values.core ?? config.coreAddr;
      const parsed = parseHostPort(coreAddr);
      if ('error' in parsed) throw new UsageError(`--core: ${parsed.error}`);
      const gateway = await startGateway({ coreAddr, ...config.httpAddr, logger: log, wsPingIntervalMs: config.wsPingIntervalMs });
      lifecycle.add('gateway', gateway.close);
      break;
    }
    case 'migrate': {
      const orm = await openStore(config, log, lifecycle);
      const applied = await migrate(orm);
      process.stdout.write(applied.length ? `applied ${applied.join(', ')}\n` : 'schema up to date\n');
      await lifecycle.stop();
      break;
    }
    case 'keys': {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { name: { type: 'string' } } });
      if (positionals[0] !== 'create' || !values.name) throw new UsageError('keys create --name NAME');
      const orm = await openStore(config, log, lifecycle);
      await migrate(orm);
      const { key, principal } = await new ApiKeys(orm).create(values.name);
      process.stdout.write(`${key}\n`);
      log.info({ keyId: principal.keyId, name: principal.name }, 'API key created');
      await lifecycle.stop();
      break;
    }
    default: {
      const packCommand = command ? packCommands.get(command) : undefined;
      if (!packCommand) throw new UsageError(command ? `unknown command "${command}"` : 'no command given');
      const orm = await openStore(config, log, lifecycle);
      await migrate(orm);
      await migratePacks(orm, packs);
      const out = await packCommand.run(rest, packDb(() => orm.em.fork())).catch((error: Error) => {
        throw /^usage: /.test(error.message) ? new UsageError(error.message.slice(7)) : error;
      });
      process.stdout.write(`${out}\n`);
      await lifecycle.stop();
    }
  }
} catch (error) {
  if (error instanceof UsageError) {
    process.stderr.write(`${error.message}\n\n${usage()}`);
  } else {
    log.fatal({ err: error }, 'failed to start');
  }
  await lifecycle.stop();
  process.exit(error instanceof UsageError ? 2 : 1);
}

