// The core: one gRPC server hosting every plane, plus the standard health service.
import { setMaxListeners } from 'node:events';
import { Server, ServerCredentials, type Metadata } from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { reflection } from '../grpc/reflection.js';
import { ApiKeys } from '../access/api-keys.js';
import type { Principal } from '../access/principal.js';
import { accessOf, authorize } from '../access/scopes.js';
import { RateLimiter } from '../access/rate-limit.js';
import { Secrets } from '../access/secrets.js';
import type { TlsFiles } from './tls.js';
import { isStreamToken, StreamTokens } from '../access/stream-tokens.js';
import { LlmUpstream } from '../execution/llm-upstream.js';
import { LlmProxy } from '../orchestrator/llm-proxy.js';
import { PolicyStore } from '../orchestrator/policy-store.js';
import { ToolCalls } from '../orchestrator/tool-calls.js';
import { Presence } from '../store/presence.js';
import { ToolCatalog } from '../store/tool-catalog.js';
import { bootTools } from '../orchestrator/tool-registry.js';
import { unauthenticated } from '../domain/errors.js';
import { RunTokens } from '../access/run-tokens.js';
import { bindService } from '../grpc/bind.js';
import { tolerantDefinition } from '../grpc/boundary.js';
import type { Logger } from '../runtime/log.js';
import { sealLegacyTokens, startHealthMonitor } from '../orchestrator/agents.js';
import type { SecretBox } from '../access/secret-box.js';
import { Runs } from '../orchestrator/runs.js';
import { EventBus } from '../store/event-bus.js';
import { EventAppender } from '../store/event-appender.js';
import { poolOf } from '../store/native.js';
import { pendingMigrations, poolIdleMs, rawEm, type Orm } from '../store/orm.js';
import { newId } from '../runtime/new-id.js';
import { services } from './services.js';
import { every, inBatches, type Ticker } from '../runtime/ticker.js';
import { ContractRegistry } from '../contracts/registry.js';
import { ContractCatalog } from '../contracts/catalog.js';
import { ContractService } from '../contracts/service.js';
import { Decision } from '../decision/decision.js';
import { ContractEngine } from '../engine/engine.js';
import type { CoreSettings } from '../config.js';
import type { AssemblyPack } from '../ports/pack.js';
import { UnitCatalog } from '../execution/units.js';
import { ToolKinds } from '../execution/tool-kinds.js';
import type { ToolKindAdapter } from '../ports/tool-kind.js';
import { AssemblyOutputs } from '../engine/outputs.js';
import { migratePacks, packDb } from '../store/pack-db.js';
import { routerBase } from '../execution/llm-upstream.js';
import OpenAI from 'openai';
import { deleteExpiredTickets } from '../store/ticket-store.js';
import { deleteExpiredIdempotencyKeys } from '../store/tool-call-store.js';
import { Capabilities } from '../engine/pep.js';
import { readOnlyPool } from '../store/read-only.js';
import { sessionConsequences } from '../observer/consequences.js';
import { Workflows } from '../workflow/registry.js';
import { serveMetrics, watchResources } from './metrics.js';
import { flushTraces, startTracing } from '../runtime/tracing.js';
import { WorkflowExecutor } from '../workflow/executor.js';

export interface Core {
  /** HOST:PORT the server is bound to (the real port when 0 was asked). */
  address: string;
  close(): Promise<void>;
}

export interface CoreOptions extends CoreSettings {
  orm: Orm;
  log: Logger;
  /** Seals secrets at rest. */
  secrets: SecretBox;
  /** The business packs this core serves. */
  packs: readonly AssemblyPack[];
  /** The kinds of tool it can call (besides those its packs bring). */
  toolKinds: readonly ToolKindAdapter[];
  /** TLS for the gRPC port; with `ca`, clients must present a certificate it signed (mutual TLS). */
  tls?: TlsFiles;
}

/**
 * Starts the core gRPC server. Health reports SERVING only while the database
 * schema is up to date, so readiness tells the truth for `abc core` started
 * ahead of `abc migrate`.
 */
export async function startCore(opts: CoreOptions): Promise<Core> {
  // The core's own lines say so; each part it runs names its own component.
  const log = opts.log.child({ component: 'core' });
  const root = opts.log;
  await startTracing('abc-core', root);
  const keys = new ApiKeys(opts.orm);
  const runTokens = new RunTokens(opts.orm);
  const bus = await EventBus.start(opts.orm.config.get('clientUrl')!, root);
  bus.onRunEnded((runId) => runTokens.ended(runId));
  const appender = new EventAppender(poolOf(opts.orm), bus);
  const shutdown = new AbortController();
  // Every service binds one listener to it.
  setMaxListeners(64, shutdown.signal);
  const coreId = newId('core');
  const readOnly = readOnlyPool(opts.orm.config.get('clientUrl')!, 4, poolIdleMs(opts.orm));
  const secrets = opts.secrets;
  // Connector credentials and agents' tokens: the secret store, sealed with the same key.
  const connectorSecrets = new Secrets(opts.orm, secrets, opts.secretGraceMs);
  const policy = await PolicyStore.open(opts.policyFile, root, { em: () => opts.orm.em.fork(), bus });
  const workflows = new Workflows(() => opts.orm.em.fork());
  // Phase workflows run their turns as runs of this built-in agent.
  const workflowAgent = new WorkflowExecutor({
    em: () => opts.orm.em.fork(),
    workflows,
    llm: () => llm,
    tools: () => toolCalls,
    defaultModel: opts.llm.model,
    transcriptLimit: opts.agentTranscriptLimit,
    secrets: connectorSecrets,
    agentIdleTimeoutMs: opts.agentIdleTimeoutMs,
    log: root,
  });
  const runs = new Runs({
    builtins: workflowAgent,
    secrets: connectorSecrets,
    consequencesOf: (tenantId, sessionId, opened) => sessionConsequences(readOnly, tenantId, sessionId, opened, opts.agentConsequencesLimit),
    orm: opts.orm,
    bus,
    appender,
    log: root,
    publicBaseUrl: opts.publicBaseUrl,
    agentIdleTimeoutMs: opts.agentIdleTimeoutMs,
    retry: opts.retry,
    coreId,
    leaseMs: opts.runLeaseMs,
    maxDepth: opts.a2aMaxDepth,
    transcriptLimit: opts.agentTranscriptLimit,
    maxRunsPerTenant: opts.tenantMaxRuns,
    policy: (tenantId: string) => policy.forTenant(tenantId),
  });
  const retry = opts.retry;
  const llm = new LlmProxy({
    orm: opts.orm,
    appender,
    log: root,
    policy: (tenantId: string) => policy.forTenant(tenantId),
    upstream: opts.llm.routerUrl
      ? new LlmUpstream({ baseUrl: opts.llm.routerUrl, apiKey: opts.llm.apiKey, timeoutMs: opts.llm.timeoutMs, retry, fallbacks: opts.llm.fallbacks })
      : undefined,
  });
  // Every kind of tool ABC can call; a new kind (MCP, A2A) is one more adapter here.
  const toolKinds = new ToolKinds([...opts.toolKinds, ...opts.packs.flatMap((p) => p.toolKinds ?? [])]);
  const presence = new Presence(opts.orm, coreId, opts.presenceTtlMs);
  // A tool written by any core has every core read the tools again.
  const tools = new ToolCatalog(() => rawEm(opts.orm));
  bus.onWake('tools', () => tools.forget());
  const toolCalls = new ToolCalls({
    orm: opts.orm,
    bus,
    log: root,
    policy,
    presence,
    kinds: toolKinds,
    tools,
    approvalTimeoutMs: opts.approvalTimeoutMs,
    idempotencyTtlMs: opts.idempotencyTtlMs,
    toolTimeoutMs: opts.toolTimeoutMs,
    toolStartDeferMs: opts.toolStartDeferMs,
    secrets: connectorSecrets,
    gate: (run, tool) => workflowAgent.refusal(run, tool),
    // A contract step's approval is its ticket's human request: the engine continues or rejects it.
    decideStep: async (ticket, decision, decidedBy, reason) => {
      await engine.submitHumanFeedback(ticket, { action: decision === 'approve' ? 'continue' : 'reject', feedback: reason, actor: decidedBy });
    },
  });
  const health = {
    em: () => opts.orm.em.fork(),
    log: root.child({ component: 'agents' }),
    intervalMs: opts.agentHeartbeatIntervalMs,
    unhealthyAfterMs: opts.agentUnhealthyAfterMs,
    secrets: connectorSecrets,
  };
  const c = opts.contracts;
  const routerUrl = opts.llm.routerUrl;
  // LLM plan steps and LLM-backed engine roles go through the proxy's own upstream path.
  const llmStep = routerUrl
    ? {
        model: opts.llm.model,
        forTenant: (tenantId: string) => ({
          model: opts.llm.model,
          // The proxy path retries and falls back on its own.
          client: (onCall?: (r: Record<string, unknown>) => void, o: { maxRetries?: number; timeoutMs?: number } = {}) =>
            new OpenAI({ baseURL: routerBase(routerUrl), apiKey: opts.llm.apiKey ?? 'unused', maxRetries: o.maxRetries ?? 0, timeout: o.timeoutMs ?? 15_000, fetch: llm.internalFetch(tenantId, onCall) }),
        }),
      }
    : undefined;
  const capabilities = new Capabilities(new UnitCatalog(opts.packs), toolKinds, Boolean(llmStep), tools, connectorSecrets);
  // The contract path sends raw statements only: one shared fork serves it.
  const raw = () => rawEm(opts.orm);
  const decision = new Decision(raw, (tenantId) => capabilities.granted(tenantId));
  // A version stored by any core may change what an intent resolves to.
  bus.onWake('assemblies', () => decision.forgetResolved());
  const contracts = new ContractCatalog(ContractRegistry.load([c.contractsDir, ...opts.packs.flatMap((p) => (p.contractsDir ? [p.contractsDir] : []))]), raw);
  const engine = new ContractEngine({
    orm: opts.orm,
    bus,
    log: root,
    decision,
    contracts,
    capabilities,
    outputs: new AssemblyOutputs(opts.packs),
    db: packDb(raw),
    llm: llmStep,
    concurrency: c.workers,
    syncExecutions: c.syncExecutions,
    stepConcurrency: c.stepConcurrency,
    stepStartDeferMs: c.stepStartDeferMs,
    leaseMs: c.leaseMs,
    pollIntervalMs: c.pollIntervalMs,
    agentIdleTimeoutMs: opts.agentIdleTimeoutMs,
    secrets: connectorSecrets,
    settings: c.engine,
    policy: (tenantId: string) => policy.forTenant(tenantId),
  });
  const contractService = new ContractService({ orm: opts.orm, bus, log: root, contracts, decision, engine, readOnly, ticketRetentionMs: c.ticketRetentionMs });
  const server = new Server({ 'grpc.max_receive_message_length': 16 * 1024 * 1024 });
  const streamTokens = new StreamTokens(secrets);
  const all = services({
    orm: opts.orm, bus, runs, keys, log: root, health, llm, toolCalls, presence, toolTimeoutMs: opts.toolTimeoutMs, helloTimeoutMs: opts.imHelloTimeoutMs, contracts: contractService, decision, readOnly, streamTokens, workflows,
  });
  const healthService = new HealthImplementation({ '': 'NOT_SERVING', ...Object.fromEntries(all.map((s) => [s.name, 'NOT_SERVING' as const])) });
  healthService.addToServer(server);

  const limiter = new RateLimiter(opts.rateLimits);
  const authenticate = async (metadata: Metadata, method: string): Promise<Principal | null> => {
    const token = bearer(metadata);
    if (!token) {
      if (accessOf(method).scope === 'anonymous') return null;
      throw unauthenticated();
    }
    if (isStreamToken(token)) {
      const stream = streamTokens.verify(token);
      if (!stream) throw unauthenticated('this stream token is invalid or has expired; mint another with POST /v1/stream_tokens');
      authorize(stream, method);
      limiter.admit(stream.keyId, stream.tenantId);
      return stream;
    }
    if (token.startsWith('abcrun_')) {
      const run = await runTokens.verify(token);
      if (!run) throw unauthenticated('unknown run token');
      authorize(run.principal, method, run.ended);
      limiter.admit(`run:${run.principal.runId}`, run.principal.tenantId);
      return run.principal;
    }
    const principal = await keys.verify(token);
    if (!principal) throw unauthenticated();
    authorize(principal, method);
    limiter.admit(principal.keyId, principal.tenantId);
    return principal;
  };
  for (const s of all) server.addService(tolerantDefinition(s.definition), bindService(s.definition, s.handlers, { log, authenticate, shutdown: shutdown.signal }));
  // Generic clients (grpcurl, Postman, grpcio's reflection client) list and describe the services.
  if (opts.grpcReflection) reflection().addToServer(server);

  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${opts.host}:${opts.port}`, serverCredentials(opts.tls), (error, bound) => (error ? reject(error) : resolve(bound))),
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
          const registered = await bootTools(opts.orm.em.fork(), toolKinds, opts.toolsFile, opts.toolTimeoutMs);
          tools.forget();
          log.info({ tools: registered }, 'tools registered');
          await contracts.boot();
          await migratePacks(opts.orm, opts.packs);
          let assemblies = 0;
          for (const dir of [c.assembliesDir, ...opts.packs.flatMap((p) => (p.assembliesDir ? [p.assembliesDir] : []))]) assemblies += await decision.boot(dir, log);
          const workflowCount = await workflows.boot(opts.workflowsDir, log);
          log.info({ workflows: workflowCount }, 'workflows registered');
          await engine.start();
          log.info({ assemblies, packs: opts.packs.map((p) => p.name), contracts: contracts.registry.list().map((x) => `${x.contract_id}@${x.version}`), workers: c.workers }, 'contract engine started');
          tickers.push(
            startHealthMonitor(health),
            every(Math.max(100, Math.floor(opts.runLeaseMs / 2)), () => runs.recoverOrphans(), log, 'run recovery sweep'),
            every(opts.timerSweepMs, () => toolCalls.sweep(), log, 'timer sweep'),
            every(opts.presenceTtlMs / 3, () => presence.refresh(), log, 'presence refresh'),
            every(Math.max(100, Math.floor(c.leaseMs / 2)), () => engine.queue.recover(), log, 'contract recovery sweep'),
            every(c.retentionSweepMs, () => inBatches((n) => deleteExpiredTickets(opts.orm.em.fork(), n), 500), log, 'ticket retention sweep'),
            every(c.retentionSweepMs, () => inBatches((n) => deleteExpiredIdempotencyKeys(opts.orm.em.fork(), n), 1000), log, 'idempotency key retention sweep'),
            every(c.retentionSweepMs, () => inBatches((n) => presence.deleteStale(n), 1000), log, 'stale connection sweep'),
          );
        }
        return;
      }
      log.warn({ pending }, 'database has pending migrations; run `abc migrate`');
    } catch (error) {
      setServing(false);
      log.error({ err: error }, 'cannot read migration state');
    }
    timer = setTimeout(() => void (checking = checkSchema()), opts.migrationPollMs);
    timer.unref();
  };
  let checking: Promise<void> = checkSchema();
  await checking;
  await watchResources(opts.orm, readOnly);
  const metricsServer = opts.metricsAddr && (await serveMetrics(opts.metricsAddr));
  log.info({ address, ...(metricsServer && { metrics: metricsServer.url }) }, 'core listening');

  return {
    address,
    close: async () => {
      clearTimeout(timer);
      await checking; // a start-up in flight finishes first, so everything it starts is stopped below
      await policy.close();
      closing = true;
      offBusState();
      refreshHealth();
      await Promise.all(tickers.map((t) => t.stop()));
      const grace = opts.drainTimeoutMs;
      await Promise.all([runs.close(grace), engine.close(grace)]);
      await llm.close();
      await toolCalls.close(grace);
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
      if (metricsServer) await metricsServer.close();
      await flushTraces();
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

/** Plain gRPC, TLS, or mutual TLS when a CA is given. */
function serverCredentials(tls: TlsFiles | undefined): ServerCredentials {
  if (!tls) return ServerCredentials.createInsecure();
  return ServerCredentials.createSsl(tls.ca ?? null, [{ cert_chain: tls.cert, private_key: tls.key }], Boolean(tls.ca));
}
