#!/usr/bin/env node
// The `abc` command: serve (all-in-one), core, gateway, migrate, tenants, keys.
import { parseArgs } from 'node:util';
import { startGateway } from '../../gateway/server.js';
import { ApiKeys } from '../access/api-keys.js';
import { parseScopes, type Scope } from '../access/scopes.js';
import { coreSettings, gatewaySettings, parseHostPort } from '../config.js';
import { bootstrapKeys, configOrExit, openStore, rootLogger, secretBox } from './boot.js';
import { startCore } from './core.js';
import { startGatewayThread } from './gateway-thread.js';
import { Lifecycle } from './lifecycle.js';
import { readTls } from './tls.js';
import { loadPacks } from './packs.js';
import { DEFAULT_TOOL_KINDS } from '../execution/tool-kinds.js';
import { migrate } from '../store/orm.js';
import { migratePacks, packDb } from '../store/pack-db.js';

const USAGE = `usage: abc <command>

  serve                     run everything: embedded or external PostgreSQL, core and gateway
  core                      run the core gRPC server on ABC_GRPC_ADDR
  gateway [--core H:P]      run the HTTP/WebSocket gateway on ABC_HTTP_ADDR against a core
  migrate                   apply pending database migrations
  tenants create ID [--name NAME]
                            create a tenant (the boundary no resource crosses)
  tenants list              list the tenants
  keys create --name NAME [--tenant ID] [--scopes client,agent,operator,admin] [--users U1,U2]
                            mint an API key and print it once; by default an admin key
                            of the default tenant; --users pins the IM users it speaks for
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
      const tls = readTls(config);
      const core = await startCore({ orm, log, ...coreSettings(config), secrets: await secretBox(config, log), packs, toolKinds: DEFAULT_TOOL_KINDS, tls });
      lifecycle.add('core', core.close);
      const gatewayOpts = { coreAddr: core.address, ...config.httpAddr, ...gatewaySettings(config), tls };
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
      const core = await startCore({ orm, log, ...coreSettings(config), secrets: await secretBox(config, log), packs, toolKinds: DEFAULT_TOOL_KINDS, tls: readTls(config) });
      lifecycle.add('core', core.close);
      break;
    }
    case 'gateway': {
      const { values } = parseArgs({ args: rest, options: { core: { type: 'string' } } });
      const coreAddr = values.core ?? config.coreAddr;
      const parsed = parseHostPort(coreAddr);
      if ('error' in parsed) throw new UsageError(`--core: ${parsed.error}`);
      const gateway = await startGateway({ coreAddr, ...config.httpAddr, logger: log, ...gatewaySettings(config), tls: readTls(config) });
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
    case 'tenants': {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { name: { type: 'string' } } });
      const [action, id] = positionals;
      if (!(action === 'create' && id) && action !== 'list') throw new UsageError('tenants create ID [--name NAME] | tenants list');
      const orm = await openStore(config, log, lifecycle);
      await migrate(orm);
      const keys = new ApiKeys(orm);
      if (action === 'list') {
        process.stdout.write((await keys.tenants()).map((t) => `${t.tenantId}\t${t.name}\n`).join(''));
      } else {
        let created: boolean;
        try {
          created = await keys.createTenant(id!, values.name);
        } catch (error) {
          throw new UsageError((error as Error).message);
        }
        process.stdout.write(created ? `created tenant ${id}\n` : `tenant ${id} exists\n`);
      }
      await lifecycle.stop();
      break;
    }
    case 'keys': {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: { name: { type: 'string' }, tenant: { type: 'string' }, scopes: { type: 'string' }, users: { type: 'string' } },
      });
      if (positionals[0] !== 'create' || !values.name) throw new UsageError('keys create --name NAME [--tenant ID] [--scopes LIST] [--users LIST]');
      let scopes: Scope[] | undefined;
      try {
        scopes = values.scopes === undefined ? undefined : parseScopes(values.scopes);
      } catch (error) {
        throw new UsageError(`--scopes: ${(error as Error).message}`);
      }
      const userIds = values.users === undefined ? undefined : values.users.split(',').map((u) => u.trim()).filter(Boolean);
      if (userIds?.length === 0) throw new UsageError('--users: name at least one user');
      const orm = await openStore(config, log, lifecycle);
      await migrate(orm);
      const created = await new ApiKeys(orm).create(values.name, { tenantId: values.tenant, scopes, userIds }).catch((error: Error) => {
        throw /^no tenant/.test(error.message) ? new UsageError(error.message) : error;
      });
      process.stdout.write(`${created.key}\n`);
      const p = created.principal;
      log.info({ keyId: p.keyId, name: p.name, tenantId: p.tenantId, scopes: p.scopes, userIds: p.userIds }, 'API key created');
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

