// The core: one gRPC server hosting every plane, plus the standard health service.
import { Server, ServerCredentials, type Metadata } from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { ApiKeys } from '../access/api-keys.js';
import type { Principal } from '../access/principal.js';
import { DEFAULT_RETRY, type RetryPolicy } from '../domain/backoff.js';
import { LlmUpstream } from '../execution/llm-upstream.js';
import { LlmProxy } from '../orchestrator/llm-proxy.js';
import { PolicyStore } from '../orchestrator/policy-store.js';
import { ToolCalls } from '../orchestrator/tool-calls.js';
import { Presence } from '../ingress/presence.js';
import { bootTools } from '../orchestrator/tool-store.js';
import { unauthenticated } from '../domain/errors.js';
import { RunTokens } from '../access/run-tokens.js';
import { bindService } from '../grpc/bind.js';
import { tolerantDefinition } from '../grpc/boundary.js';
import type { Logger } from '../log.js';
import { sealLegacyTokens, startHealthMonitor } from '../orchestrator/agents.js';
import { SecretBox } from '../access/secret-box.js';
import { Runs } from '../orchestrator/runs.js';
import { EventBus } from '../store/event-bus.js';
import { pendingMigrations, type Orm } from '../store/orm.js';
import { newId } from '../ids.js';
import { services } from './services.js';
import { every, type Ticker } from '../ticker.js';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { ContractRegistry } from '../contracts/registry.js';
import { ContractService } from '../contracts/service.js';
import { Decision } from '../decision/decision.js';
import { ContractEngine } from '../engine/engine.js';
import type { EngineSettings } from '../domain/engine-policy.js';
import { deleteExpiredTickets } from '../engine/ticket-store.js';
import { grantedCapabilities } from '../engine/pep.js';
import { loadMarketData } from '../portfolio/market.js';
import { readOnlyPool } from '../store/read-only.js';
import { sessionConsequences } from '../observer/consequences.js';
import { factFailures } from '../store/execution-contracts.js';

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
  publicBaseUrl?: string;
  agentHeartbeatIntervalMs?: number;
  agentUnhealthyAfterMs?: number;
  agentIdleTimeoutMs?: number;
  retry?: RetryPolicy;
  /** How long a run's lease lasts before another core may recover it. */
  runLeaseMs?: number;
  /** How deep agent-to-agent calls may nest. */
  a2aMaxDepth?: number;
  policyFile?: string;
  toolsFile?: string;
  toolTimeoutMs?: number;
  approvalTimeoutMs?: number;
  idempotencyTtlMs?: number;
  /** How often tool and approval deadlines are swept. */
  timerSweepMs?: number;
  llm?: { routerUrl?: string; apiKey?: string; timeoutMs?: number; fallbacks?: Record<string, string[]> };
  contracts?: ContractOptions;
  /** How often to re-check for pending migrations while not serving. */
  migrationPollMs?: number;
  /** At shutdown, how long runs and tickets in flight may finish before they are handed back (default 10 s). */
  drainTimeoutMs?: number;
  /** Seals secrets at rest; a random key for this process when unset. */
  secrets?: SecretBox;
  /** An IM connection that has not said a valid hello by then is closed (default 10 s). */
  imHelloTimeoutMs?: number;
  /** How many of a session's latest messages an agent receives on invoke (default 1,000). */
  agentTranscriptLimit?: number;
}

export interface ContractOptions {
  workers?: number;
  leaseMs?: number;
  ticketRetentionMs?: number;
  llmModel?: string;
  stepConcurrency?: number;
  /** Engine policy defaults under every assembly's `engine` section (seed 002). */
  engine?: Partial<EngineSettings>;
  /** How often finished tickets past their retention are deleted. */
  retentionSweepMs?: number;
  /** Where contracts, assemblies and market data live; defaults to the package's own folders. */
  contractsDir?: string;
  assembliesDir?: string;
  marketDataDir?: string;
}

const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

const ANONYMOUS_METHODS = new Set(['/abc.ingress.v1.IngressService/Connect']);
/** What a run token may still do once its run has ended: read the transcript it wrote. */
const AFTER_RUN_METHODS = new Set(['/abc.orchestrator.v1.SessionService/GetSession', '/abc.orchestrator.v1.SessionService/ListMessages']);
/** A client connection not refreshed for this long no longer counts as online. */
const PRESENCE_TTL_MS = 30_000;

/**
 * Starts the core gRPC server. Health reports SERVING only while the database
 * schema is up to date, so readiness tells the truth for `abc core` started
 * ahead of `abc migrate`.
 */
export async function startCore(opts: CoreOptions): Promise<Core> {
  const log = opts.log.child({ component: 'core' });
  const keys = new ApiKeys(opts.orm);
  const runTokens = new RunTokens(opts.orm);
  const bus = await EventBus.start(opts.orm.config.get('clientUrl')!, log);
  bus.onRunEnded((runId) => runTokens.ended(runId));
  const shutdown = new AbortController();
  const coreId = newId('core');
  const readOnly = readOnlyPool(opts.orm.config.get('clientUrl')!);
  factFailures.log = log;
  const secrets = opts.secrets ?? SecretBox.ephemeral();
  const runs = new Runs({
    secrets,
    consequencesOf: (sessionId) => sessionConsequences(readOnly, sessionId),
    orm: opts.orm,
    bus,
    log,
    publicBaseUrl: opts.publicBaseUrl ?? 'http://127.0.0.1:8080',
    agentIdleTimeoutMs: opts.agentIdleTimeoutMs ?? 120_000,
    retry: opts.retry ?? DEFAULT_RETRY,
    coreId,
    leaseMs: opts.runLeaseMs ?? 15_000,
    maxDepth: opts.a2aMaxDepth,
    transcriptLimit: opts.agentTranscriptLimit,
  });
  const retry = opts.retry ?? DEFAULT_RETRY;
  const llm = new LlmProxy({
    orm: opts.orm,
    log,
    upstream: opts.llm?.routerUrl
      ? new LlmUpstream({ baseUrl: opts.llm.routerUrl, apiKey: opts.llm.apiKey, timeoutMs: opts.llm.timeoutMs ?? 60_000, retry, fallbacks: opts.llm.fallbacks ?? {} })
      : undefined,
  });
  const policy = await PolicyStore.open(opts.policyFile, log);
  const presence = new Presence(opts.orm, coreId, PRESENCE_TTL_MS);
  const toolCalls = new ToolCalls({
    orm: opts.orm,
    bus,
    log,
    policy,
    presence,
    approvalTimeoutMs: opts.approvalTimeoutMs ?? 600_000,
    idempotencyTtlMs: opts.idempotencyTtlMs ?? 86_400_000,
  });
  const health = {
    em: () => opts.orm.em.fork(),
    log,
    intervalMs: opts.agentHeartbeatIntervalMs ?? 30_000,
    unhealthyAfterMs: opts.agentUnhealthyAfterMs ?? 90_000,
    secrets,
  };
  const c = opts.contracts ?? {};
  // LLM plan steps and LLM-backed engine roles go through the proxy's own upstream path.
  const llmStep = opts.llm?.routerUrl
    ? { baseUrl: opts.llm.routerUrl, apiKey: opts.llm.apiKey, model: c.llmModel ?? 'gpt-4o-mini', viaProxy: (onCall?: (r: Record<string, unknown>) => void) => llm.internalFetch(onCall) }
    : undefined;
  const decision = new Decision(() => opts.orm.em.fork(), () => grantedCapabilities(opts.orm.em.fork(), Boolean(llmStep)));
  const contracts = ContractRegistry.load(c.contractsDir ?? path.join(PACKAGE_ROOT, 'contracts'));
  const engine = new ContractEngine({
    orm: opts.orm,
    bus,
    log,
    decision,
    contracts,
    market: loadMarketData(c.marketDataDir ?? path.join(PACKAGE_ROOT, 'data/market')),
    llm: llmStep,
    concurrency: c.workers ?? 4,
    stepConcurrency: c.stepConcurrency ?? 4,
    leaseMs: c.leaseMs ?? 15_000,
    agentIdleTimeoutMs: opts.agentIdleTimeoutMs ?? 120_000,
    secrets,
    ...(c.engine && { settings: c.engine }),
  });
  const contractService = new ContractService({ orm: opts.orm, bus, log, contracts, decision, engine, readOnly, ticketRetentionMs: c.ticketRetentionMs ?? 86_400_000 });
  const server = new Server({ 'grpc.max_receive_message_length': 16 * 1024 * 1024 });
  const all = services({
    orm: opts.orm, bus, runs, keys, log, health, llm, toolCalls, presence, toolTimeoutMs: opts.toolTimeoutMs ?? 60_000, helloTimeoutMs: opts.imHelloTimeoutMs ?? 10_000, contracts: contractService, decision, readOnly,
  });
  const healthService = new HealthImplementation({ '': 'NOT_SERVING', ...Object.fromEntries(all.map((s) => [s.name, 'NOT_SERVING' as const])) });
  healthService.addToServer(server);

  const authenticate = async (metadata: Metadata, method: string): Promise<Principal | null> => {
    const token = bearer(metadata);
    if (!token) {
      if (ANONYMOUS_METHODS.has(method)) return null;
      throw unauthenticated();
    }
    if (token.startsWith('abcrun_')) {
      const run = await runTokens.verify(token);
      if (!run) throw unauthenticated('unknown run token');
      if (run.ended && !AFTER_RUN_METHODS.has(method)) throw unauthenticated('this run token has expired: its run has ended (it may still read its transcript)');
      return run.principal;
    }
    const principal = await keys.verify(token);
    if (!principal) throw unauthenticated();
    return principal;
  };
  for (const s of all) server.addService(tolerantDefinition(s.definition), bindService(s.definition, s.handlers, { log, authenticate, shutdown: shutdown.signal }));

  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${opts.host}:${opts.port}`, ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  const address = `${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`;

  let timer: NodeJS.Timeout | undefined;
  const tickers: Ticker[] = [];
  // Serving means: migrations applied, the database reachable now (the listener
  // holds a live, probed connection), and not shutting down.
  let schemaReady = false;
  let closing = false;
  const refreshHealth = () => {
    const status = schemaReady && bus.connected && !closing ? 'SERVING' : 'NOT_SERVING';
    healthService.setStatus('', status);
    for (const s of all) healthService.setStatus(s.name, status);
  };
  const setServing = (serving: boolean) => {
    schemaReady = serving;
    refreshHealth();
  };
  const offBusState = bus.onState((connected) => {
    log[connected ? 'info' : 'warn']({ database: connected ? 'reachable' : 'unreachable' }, connected ? 'database reachable again: serving' : 'database unreachable: not serving');
    refreshHealth();
  });
  const checkSchema = async () => {
    try {
      const pending = await pendingMigrations(opts.orm);
      setServing(pending.length === 0);
      if (pending.length === 0) {
        if (tickers.length === 0) {
          const sealed = await sealLegacyTokens(opts.orm.em.fork(), secrets);
          if (sealed) log.info({ agents: sealed }, 'sealed agent tokens stored in plaintext');
          const tools = await bootTools(opts.orm.em.fork(), opts.toolsFile, opts.toolTimeoutMs ?? 60_000);
          log.info({ tools }, 'tools registered');
          const assemblies = await decision.boot(c.assembliesDir ?? path.join(PACKAGE_ROOT, 'assemblies'), log);
          await engine.start();
          log.info({ assemblies, contracts: contracts.list().map((x) => `${x.contract_id}@${x.version}`), workers: c.workers ?? 4 }, 'contract engine started');
          tickers.push(
            startHealthMonitor(health),
            every(Math.max(100, Math.floor((opts.runLeaseMs ?? 15_000) / 2)), () => runs.recoverOrphans(), log, 'run recovery sweep'),
            every(opts.timerSweepMs ?? 1000, () => toolCalls.sweep(), log, 'timer sweep'),
            every(PRESENCE_TTL_MS / 3, () => presence.refresh(), log, 'presence refresh'),
            every(Math.max(100, Math.floor((c.leaseMs ?? 15_000) / 2)), () => engine.queue.recover(), log, 'contract recovery sweep'),
            every(c.retentionSweepMs ?? 60_000, () => deleteExpiredTickets(opts.orm.em.fork()), log, 'ticket retention sweep'),
          );
        }
        return;
      }
      log.warn({ pending }, 'database has pending migrations; run `abc migrate`');
    } catch (error) {
      setServing(false);
      log.error({ err: error }, 'cannot read migration state');
    }
    timer = setTimeout(() => void (checking = checkSchema()), opts.migrationPollMs ?? 2000);
    timer.unref();
  };
  let checking: Promise<void> = checkSchema();
  await checking;
  log.info({ address }, 'core listening');

  return {
    address,
    close: async () => {
      clearTimeout(timer);
      await checking; // a start-up in flight finishes first, so everything it starts is stopped below
      policy.close();
      closing = true;
      offBusState();
      refreshHealth();
      await Promise.all(tickers.map((t) => t.stop()));
      const grace = opts.drainTimeoutMs ?? 10_000;
      await Promise.all([runs.close(grace), engine.close(grace)]);
      await llm.close();
      await toolCalls.close();
      shutdown.abort();
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          log.warn('drain timed out; forcing shutdown');
          server.forceShutdown();
          resolve();
        }, 1000);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
      await presence.close();
      await bus.close();
      await readOnly.end();
      log.info('core stopped');
    },
  };
}

/** The token from `authorization: Bearer TOKEN` or `x-api-key`. */
export function bearer(metadata: Metadata): string | undefined {
  const auth = metadata.get('authorization')[0];
  if (typeof auth === 'string' && /^bearer\s+/i.test(auth)) return auth.replace(/^bearer\s+/i, '').trim();
  const key = metadata.get('x-api-key')[0];
  return typeof key === 'string' ? key : undefined;
}
