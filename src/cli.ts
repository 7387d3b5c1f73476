#!/usr/bin/env node
// The `abc` command: serve (all-in-one), core, gateway, migrate, keys create.
import { parseArgs } from 'node:util';
import { startGateway } from '../gateway/server.js';
import { ApiKeys } from './access/api-keys.js';
import { parseHostPort } from './config.js';
import { bootstrapKeys, configOrExit, coreOptions, openStore, rootLogger, secretBox } from './main/boot.js';
import { startCore } from './main/core.js';
import { startGatewayThread } from './main/gateway-thread.js';
import { Lifecycle } from './main/lifecycle.js';
import { migrate } from './store/orm.js';
import { readFile } from 'node:fs/promises';
import { importPortfolios, type PortfolioDoc } from './portfolio/store.js';

const USAGE = `usage: abc <command>

  serve                     run everything: embedded or external PostgreSQL, core and gateway
  core                      run the core gRPC server on ABC_GRPC_ADDR
  gateway [--core H:P]      run the HTTP/WebSocket gateway on ABC_HTTP_ADDR against a core
  migrate                   apply pending database migrations
  keys create --name NAME   mint an API key and print it once
  portfolios import FILE    load portfolios ({"portfolios": [...]}) for input.portfolio_ref
`;

class UsageError extends Error {}

const [command, ...rest] = process.argv.slice(2);
const config = configOrExit();
const log = rootLogger(config);
const lifecycle = new Lifecycle(log);
lifecycle.exitOnSignals();

try {
  switch (command) {
    case 'serve': {
      const orm = await openStore(config, log, lifecycle);
      const applied = await migrate(orm);
      log.info({ applied }, applied.length ? 'migrations applied' : 'schema up to date');
      await bootstrapKeys(config, orm, log);
      const core = await startCore({ orm, log, ...coreOptions(config), secrets: await secretBox(config, log) });
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
      const core = await startCore({ orm, log, ...coreOptions(config), secrets: await secretBox(config, log) });
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
    case 'portfolios': {
      const [sub, file] = rest;
      if (sub !== 'import' || !file) throw new UsageError('portfolios import FILE');
      const doc = JSON.parse(await readFile(file, 'utf8')) as { portfolios?: PortfolioDoc[] };
      if (!Array.isArray(doc.portfolios)) throw new UsageError(`${file} has no "portfolios" array`);
      const orm = await openStore(config, log, lifecycle);
      await migrate(orm);
      const count = await importPortfolios(orm.em.fork(), doc.portfolios);
      process.stdout.write(`imported ${count} portfolio(s): ${doc.portfolios.map((p) => p.portfolio_id).join(', ')}\n`);
      await lifecycle.stop();
      break;
    }
    default:
      throw new UsageError(command ? `unknown command "${command}"` : 'no command given');
  }
} catch (error) {
  if (error instanceof UsageError) {
    process.stderr.write(`${error.message}\n\n${USAGE}`);
  } else {
    log.fatal({ err: error }, 'failed to start');
  }
  await lifecycle.stop();
  process.exit(error instanceof UsageError ? 2 : 1);
}

