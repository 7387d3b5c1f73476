#!/usr/bin/env node
// The `abc` command: serve (all-in-one), core, gateway, migrate, tenants, keys, agents.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { startGateway } from '../../gateway/server.js';
import { ApiKeys } from '../access/api-keys.js';
import { parseScopes, type Scope } from '../access/scopes.js';
import { coreSettings, gatewaySettings, loadConfig, parseHostPort } from '../config.js';
import { bootstrapKeys, configOrExit, openStore, rootLogger, secretBox } from './boot.js';
import { startCore } from './core.js';
import { startGatewayThread } from './gateway-thread.js';
import { Lifecycle } from './lifecycle.js';
import { readTls } from './tls.js';
import { loadPacks } from './packs.js';
import { startTracing } from '../runtime/tracing.js';
import { DEFAULT_TOOL_KINDS } from '../execution/tool-kinds.js';
import { migrate } from '../store/orm.js';
import { deleteAgent } from '../store/agent-store.js';
import { DEFAULT_TENANT } from '../access/principal.js';
import { migratePacks, packDb } from '../store/pack-db.js';

/** Every command: its synopsis, one line, and what `abc help CMD` adds. */
const COMMANDS: Record<string, { usage: string; summary: string; more?: string }> = {
  serve: {
    usage: 'serve',
    summary: 'run everything: embedded or external PostgreSQL, core and gateway',
    more: 'With no DATABASE_URL it runs an embedded PostgreSQL with its data in ABC_DATA_DIR (./.abc).\nThe gateway listens on ABC_HTTP_ADDR (127.0.0.1:8080), the core on ABC_GRPC_ADDR (127.0.0.1:50051).\nEvery variable: docs/configuration.md.',
  },
  core: { usage: 'core', summary: 'run the core gRPC server on ABC_GRPC_ADDR' },
  gateway: { usage: 'gateway [--core HOST:PORT]', summary: 'run the HTTP/WebSocket gateway on ABC_HTTP_ADDR against a core (ORCHESTRATOR_URL, else ABC_GRPC_ADDR, by default)' },
  migrate: { usage: 'migrate', summary: 'apply pending database migrations' },
  tenants: { usage: 'tenants create ID [--name NAME] | tenants list', summary: 'create or list tenants (the boundary no resource crosses)' },
  keys: {
    usage: 'keys create --name NAME [--tenant ID] [--scopes client,agent,operator,admin] [--users U1,U2]',
    summary: 'mint an API key and print it once',
    more: 'By default an admin key of the default tenant; --users pins the IM users it speaks for.',
  },
  agents: { usage: 'agents rm AGENT_ID [--tenant ID]', summary: "deregister an agent: it is no longer invoked or health-checked; its runs stay" },
};

class UsageError extends Error {}

const [command, ...rest] = process.argv.slice(2);
const HELP = new Set(['--help', '-h']);

/** `abc`, `abc --help`, `abc help [CMD]`, `abc CMD --help`, `abc --version`: answered before anything starts. */
if (command === undefined || HELP.has(command) || command === 'help') {
  process.stdout.write(await helpText(command === 'help' ? rest[0] : undefined));
  process.exit(command === undefined ? 2 : 0);
}
if (command === '--version' || command === '-v' || command === 'version') {
  process.stdout.write(`abc ${packageVersion()}\n`);
  process.exit(0);
}
if (rest.some((a) => HELP.has(a))) {
  process.stdout.write(await helpText(command));
  process.exit(0);
}

const config = configOrExit();
const log = rootLogger(config);
const packs = await loadPacks(config.packsDir).catch((error: Error) => {
  process.stderr.write(`ABC_PACKS_DIR ${config.packsDir}: ${error.message}\n`);
  process.exit(2);
});
const packCommands = new Map(packs.flatMap((p) => Object.entries(p.commands ?? {})));
const lifecycle = new Lifecycle(log);
lifecycle.exitOnSignals();

try {
  switch (command) {
    case 'serve': {
      lifecycle.add('tracing', (await startTracing('abc', log)).shutdown);
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
      lifecycle.add('tracing', (await startTracing('abc-core', log)).shutdown);
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
      lifecycle.add('tracing', (await startTracing('abc-gateway', log)).shutdown);
      const gateway = await startGateway({ coreAddr, ...config.httpAddr, logger: log, ...gatewaySettings(config), tls: readTls(config) });
      lifecycle.add('gateway', gateway.close);
      break;
    }
    case 'migrate': {
      const orm = await openStore(config, log, lifecycle, true);
      const applied = await migrate(orm);
      process.stdout.write(applied.length ? `applied ${applied.join(', ')}\n` : 'schema up to date\n');
      await lifecycle.stop();
      break;
    }
    case 'tenants': {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { name: { type: 'string' } } });
      const [action, id] = positionals;
      if (!(action === 'create' && id) && action !== 'list') throw new UsageError('tenants create ID [--name NAME] | tenants list');
      const orm = await openStore(config, log, lifecycle, true);
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
      const orm = await openStore(config, log, lifecycle, true);
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
    case 'agents': {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { tenant: { type: 'string' } } });
      const [action, agentId] = positionals;
      if (action !== 'rm' || !agentId || positionals.length > 2) throw new UsageError('name the agent to remove');
      const orm = await openStore(config, log, lifecycle, true);
      await migrate(orm);
      const removed = await deleteAgent(orm.em.fork(), values.tenant ?? DEFAULT_TENANT, agentId);
      if (!removed) throw new UsageError(`no agent ${agentId} in tenant ${values.tenant ?? DEFAULT_TENANT}`);
      process.stdout.write(`removed agent ${agentId}\n`);
      await lifecycle.stop();
      break;
    }
    default: {
      const packCommand = command ? packCommands.get(command) : undefined;
      if (!packCommand) throw new UsageError(`unknown command "${command}"; abc --help lists them`);
      const orm = await openStore(config, log, lifecycle, true);
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
  const problem = userProblem(error);
  if (problem) process.stderr.write(`abc ${command}: ${problem}\n`);
  else log.fatal({ err: error }, 'failed to start');
  await lifecycle.stop();
  process.exit(error instanceof UsageError || isParseError(error) ? 2 : 1);
}

/** A user's mistake as one line (no stack): bad usage, an unknown flag, an address in use, a data directory in use. */
function userProblem(error: unknown): string | undefined {
  if (error instanceof UsageError) return `${error.message}\nusage: abc ${COMMANDS[command!]?.usage ?? '<command>'}   (abc help ${command} for more)`;
  if (isParseError(error)) return `${(error as Error).message}\nusage: abc ${COMMANDS[command!]?.usage ?? command}`;
  const e = error as NodeJS.ErrnoException & { address?: string; port?: number };
  const text = String(e?.message ?? '');
  if (e?.code === 'EADDRINUSE' || /EADDRINUSE|address already in use/i.test(text)) {
    const where = e.address ? `${e.address}:${e.port}` : (/(\d{1,3}(?:\.\d{1,3}){3}:\d+)/.exec(text)?.[1] ?? 'its address');
    return `cannot listen on ${where}: the address is in use (set ABC_HTTP_ADDR or ABC_GRPC_ADDR to another port)`;
  }
  if (/is in use by ABC process \d+/.test(text)) return text;
  return undefined;
}

function isParseError(error: unknown): boolean {
  return typeof (error as { code?: unknown })?.code === 'string' && (error as { code: string }).code.startsWith('ERR_PARSE_ARGS');
}

/** The general help, or one command's. Pack commands are listed when the packs load. */
async function helpText(name?: string): Promise<string> {
  const packs = await packUsages();
  if (name) {
    const c = COMMANDS[name];
    const packUsage = packs.find((u) => u.startsWith(`${name} `) || u === name);
    if (!c && !packUsage) return `abc: unknown command "${name}"\n\n${await helpText()}`;
    return c ? `usage: abc ${c.usage}\n\n${c.summary}.\n${c.more ? `\n${c.more}\n` : ''}` : `usage: abc ${packUsage}\n`;
  }
  const lines = Object.values(COMMANDS).map((c) => `  ${c.usage}\n      ${c.summary}`);
  return `abc ${packageVersion()}: the control plane for AI agents\n\nusage: abc <command> [options]\n\n${lines.join('\n')}\n${packs.map((u) => `  ${u}`).join('\n')}${packs.length ? '\n' : ''}\n  help [COMMAND]  this help, or a command's\n  --version       the version\n`;
}

async function packUsages(): Promise<string[]> {
  const result = loadConfig(process.env);
  if (!result.ok) return [];
  const loaded = await loadPacks(result.config.packsDir).catch(() => []);
  return loaded.flatMap((p) => Object.values(p.commands ?? {}).map((c) => c.usage));
}

function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}
