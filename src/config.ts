// Configuration from environment variables (seed 001 §13.2, ARCHITECTURE §3).
// Parsing returns every problem as a value; the composition root decides to exit.
import { parseSecretKey } from './domain/secret-key.js';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RetryPolicy } from './domain/backoff.js';
import type { EngineSettings } from './domain/engine-policy.js';

/** The package's own folders hold the shipped packs, contracts and assemblies. */
const PACKAGE_ROOT = fileURLToPath(new URL('../', import.meta.url));

export interface Config {
  databaseUrl: string | undefined;
  /**
   * How long a pooled database connection may stay idle before it closes; 0
   * keeps it open (ABC_DB_POOL_IDLE_MS). A fresh connection's backend
   * compiles ABC's PL/pgSQL functions and plans its statements again, so a
   * burst after a lull shorter than this finds its connections warm.
   */
  dbPoolIdleMs: number;
  dataDir: string;
  grpcAddr: HostPort;
  httpAddr: HostPort;
  /** Where a core serves /metrics on its own (Prometheus, no credential); unset: only through the gateway. */
  metricsAddr: HostPort | undefined;
  /** Whether the core answers gRPC server reflection (grpc.reflection.v1 and v1alpha). */
  grpcReflection: boolean;
  /** Where the gateway finds the core (ORCHESTRATOR_URL, or ABC_GRPC_ADDR). */
  coreAddr: string;
  publicBaseUrl: string;
  apiKeys: string[];
  /** The key that seals secrets at rest (agents' tokens); unset: $ABC_DATA_DIR/secret-key. */
  secretKey: Buffer | undefined;
  llmRouterUrl: string | undefined;
  /** Bearer token ABC sends to the LLM router; never logged or echoed. */
  llmRouterApiKey: string | undefined;
  /** model -> models to try in order after retries run out (LLM_FALLBACKS=gpt-4:gpt-4o-mini,a:b:c). */
  llmFallbacks: Record<string, string[]>;
  /** No byte from the LLM router for this long is a timeout. */
  llmTimeoutMs: number;
  toolTimeoutMs: number;
  /** How long an allowed server call of a tool without side effects may run before its start is committed alone (ABC_TOOL_START_DEFER_MS). */
  toolStartDeferMs: number;
  approvalTimeoutMs: number;
  agentHeartbeatIntervalMs: number;
  agentUnhealthyAfterMs: number;
  wsPingIntervalMs: number;
  /** An IM connection that has not said a valid hello by then is closed. */
  imHelloTimeoutMs: number;
  /** `abc serve` runs the gateway on its own thread (default: when there is more than one core). */
  gatewayThread: boolean;
  idempotencyTtlMs: number;
  /** No byte from an agent for this long fails the run with agent_error. */
  agentIdleTimeoutMs: number;
  /** How deep agent-to-agent calls may nest. */
  a2aMaxDepth: number;
  /** The policy file, reloaded when it changes. */
  policyFile: string | undefined;
  /** Tools registered at boot (a JSON array). */
  toolsFile: string | undefined;
  /** A run whose executor has not renewed its lease for this long is recovered by another core. */
  runLeaseMs: number;
  /** How many of a session's latest messages an agent receives on invoke. */
  agentTranscriptLimit: number;
  /** How many of a session's latest consequence views an agent receives on invoke. */
  agentConsequencesLimit: number;
  /** At shutdown, how long work in flight may finish before it is handed back. */
  shutdownGraceMs: number;
  /** Backoff of seed 001 §10.2, for agent and upstream calls. */
  retry: RetryPolicy;
  logLevel: LogLevel;
  /** Contract queue workers in this core; 0 only accepts and enqueues. */
  contractWorkers: number;
  /** Sync submissions this core runs at once in their own request; more wait in the queue. */
  contractSyncExecutions: number;
  /** A contract execution whose worker stops renewing for this long is resumed by another. */
  contractLeaseMs: number;
  /** How long a ticket stays pollable. */
  ticketRetentionMs: number;
  /** The model of LLM plan steps (used only with LLM_ROUTER_URL). */
  contractLlmModel: string;
  /** Engine defaults under every assembly's `engine` section (seed 002). */
  engineHumanTimeoutMs: number;
  engineMaxConsecutiveFailures: number;
  /** Steps of one execution that may run at once, unless its assembly says otherwise. */
  engineStepConcurrency: number;
  /** How long a step without side effects may run before its start is committed alone (ABC_STEP_START_DEFER_MS). */
  stepStartDeferMs: number;
  /** Business packs (`<dir>/<name>/index.ts`), contracts (`<group>/<name>/<version>/`) and assemblies (`<intent>/<version>.json`) loaded at boot. */
  packsDir: string;
  contractsDir: string;
  assembliesDir: string;
  /** Phase workflow definitions (`<workflow_id>/<version>.json`, seed 003) registered at boot. */
  workflowsDir: string;
  /** How often tool and approval deadlines are swept. */
  timerSweepMs: number;
  /** How often finished tickets past their retention are deleted. */
  retentionSweepMs: number;
  /** How often an idle contract worker looks for work a notification did not bring. */
  queuePollMs: number;
  /** While the schema is behind, how often the core checks it again. */
  migrationPollMs: number;
  /** A client connection not refreshed for this long no longer counts as online. */
  presenceTtlMs: number;
  /** Calls a second one API key may make (bursts of twice that); 0: no limit. */
  keyRatePerSecond: number;
  /** Calls a second all keys of one tenant may make together (bursts of twice that); 0: no limit. */
  tenantRatePerSecond: number;
  /** Runs one tenant may have going at once; 0: no limit. */
  tenantMaxRuns: number;
  /** Browser origins allowed by CORS and on the IM WebSocket (ABC_CORS_ORIGINS=https://a.example,https://b.example). */
  corsOrigins: string[];
  /** Failed authentications one client address may make a minute before the gateway answers 429. */
  authFailuresPerMinute: number;
  /** Reverse proxies whose X-Forwarded-For the gateway believes (addresses or CIDRs), so limits see clients, not the proxy. */
  trustedProxies: string[];
  /** How long a replaced secret version stays usable by its explicit version. */
  secretGraceMs: number;
  /** TLS for the gateway (HTTPS, WSS) and the core (gRPC): a PEM certificate chain and key. */
  tlsCertFile: string | undefined;
  tlsKeyFile: string | undefined;
  /** With it, mutual TLS between gateway and core: the CA both certificates are signed by. */
  tlsCaFile: string | undefined;
}

export interface HostPort {
  host: string;
  port: number;
}

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface ConfigProblem {
  variable: string;
  message: string;
}

export type ConfigResult = { ok: true; config: Config } | { ok: false; problems: ConfigProblem[] };

const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

type Parsed<T> = { value: T } | { error: string };

/** Reads and validates the whole configuration, reporting every bad variable at once. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): ConfigResult {
  const problems: ConfigProblem[] = [];
  const read = <T>(variable: string, fallback: T, parse: (raw: string) => Parsed<T>): T => {
    const raw = env[variable]?.trim();
    if (!raw) return fallback;
    const parsed = parse(raw);
    if ('error' in parsed) {
      problems.push({ variable, message: parsed.error });
      return fallback;
    }
    return parsed.value;
  };
  const ms = (variable: string, fallback: number) => read(variable, fallback, parsePositiveInt);

  const grpcAddr = read('ABC_GRPC_ADDR', { host: '127.0.0.1', port: 50051 }, parseHostPort);
  const httpAddr = read('ABC_HTTP_ADDR', { host: '127.0.0.1', port: 8080 }, parseHostPort);
  const config: Config = {
    databaseUrl: read<string | undefined>('DATABASE_URL', undefined, parseDatabaseUrl),
    dbPoolIdleMs: read('ABC_DB_POOL_IDLE_MS', 300_000, parseMsOrZero),
    dataDir: path.resolve(read('ABC_DATA_DIR', './.abc', (raw) => ({ value: raw }))),
    grpcAddr,
    httpAddr,
    metricsAddr: read<HostPort | undefined>('ABC_METRICS_ADDR', undefined, parseHostPort),
    grpcReflection: read('ABC_GRPC_REFLECTION', true, parseSwitch),
    coreAddr: read('ORCHESTRATOR_URL', `${grpcAddr.host}:${grpcAddr.port}`, parseCoreAddr),
    publicBaseUrl: read('ABC_PUBLIC_URL', `http://${httpAddr.host}:${httpAddr.port}`, parseHttpUrl),
    apiKeys: read('ABC_API_KEYS', [], parseApiKeys),
    secretKey: read<Buffer | undefined>('ABC_SECRET_KEY', undefined, parseSecretKey),
    llmRouterUrl: read<string | undefined>('LLM_ROUTER_URL', undefined, parseHttpUrl),
    llmRouterApiKey: read<string | undefined>('LLM_ROUTER_API_KEY', undefined, (raw) => ({ value: raw })),
    llmFallbacks: read('LLM_FALLBACKS', {}, parseFallbacks),
    llmTimeoutMs: ms('LLM_TIMEOUT_MS', 60_000),
    toolTimeoutMs: ms('TOOL_TIMEOUT_MS', 60_000),
    toolStartDeferMs: read('ABC_TOOL_START_DEFER_MS', 50, parseMsOrZero),
    approvalTimeoutMs: ms('APPROVAL_TIMEOUT_MS', 600_000),
    agentHeartbeatIntervalMs: ms('AGENT_HEARTBEAT_INTERVAL_MS', 30_000),
    agentUnhealthyAfterMs: ms('AGENT_UNHEALTHY_AFTER_MS', 90_000),
    wsPingIntervalMs: ms('WS_PING_INTERVAL_MS', 30_000),
    imHelloTimeoutMs: ms('IM_HELLO_TIMEOUT_MS', 10_000),
    gatewayThread: read('ABC_GATEWAY_THREAD', os.availableParallelism() > 1, parseSwitch),
    idempotencyTtlMs: ms('IDEMPOTENCY_TTL_MS', 86_400_000),
    agentIdleTimeoutMs: ms('AGENT_IDLE_TIMEOUT_MS', 120_000),
    runLeaseMs: ms('RUN_LEASE_MS', 15_000),
    shutdownGraceMs: ms('ABC_SHUTDOWN_GRACE_MS', 10_000),
    agentTranscriptLimit: read('AGENT_TRANSCRIPT_LIMIT', 1000, parseLimit),
    agentConsequencesLimit: read('AGENT_CONSEQUENCES_LIMIT', 100, parseLimit),
    a2aMaxDepth: ms('A2A_MAX_DEPTH', 5),
    policyFile: read<string | undefined>('ABC_POLICY_FILE', undefined, (raw) => ({ value: path.resolve(raw) })),
    toolsFile: read<string | undefined>('ABC_TOOLS_FILE', undefined, (raw) => ({ value: path.resolve(raw) })),
    retry: {
      maxRetries: read('RETRY_MAX_RETRIES', 3, parseCount),
      initialDelayMs: ms('RETRY_INITIAL_DELAY_MS', 1000),
      maxDelayMs: ms('RETRY_MAX_DELAY_MS', 30_000),
      multiplier: read('RETRY_MULTIPLIER', 2, parseFraction),
      jitter: read('RETRY_JITTER', 0.1, parseFraction),
    },
    logLevel: read('LOG_LEVEL', 'info', parseLogLevel),
    contractWorkers: read('ABC_CONTRACT_WORKERS', 4, parseCount),
    contractSyncExecutions: read('ABC_CONTRACT_SYNC_EXECUTIONS', 16, parseCount),
    contractLeaseMs: ms('ABC_CONTRACT_LEASE_MS', 15_000),
    ticketRetentionMs: ms('ABC_TICKET_RETENTION_MS', 86_400_000),
    contractLlmModel: read('ABC_CONTRACT_LLM_MODEL', 'gpt-4o-mini', (raw) => ({ value: raw })),
    engineHumanTimeoutMs: ms('ABC_ENGINE_HUMAN_TIMEOUT_MS', 3_600_000),
    engineMaxConsecutiveFailures: read('ABC_ENGINE_MAX_CONSECUTIVE_FAILURES', 3, parsePositiveInt),
    engineStepConcurrency: read('ABC_ENGINE_STEP_CONCURRENCY', 4, parsePositiveInt),
    stepStartDeferMs: read('ABC_STEP_START_DEFER_MS', 50, parseMsOrZero),
    packsDir: read('ABC_PACKS_DIR', path.join(PACKAGE_ROOT, 'packs'), (raw) => ({ value: path.resolve(raw) })),
    contractsDir: read('ABC_CONTRACTS_DIR', path.join(PACKAGE_ROOT, 'contracts'), (raw) => ({ value: path.resolve(raw) })),
    assembliesDir: read('ABC_ASSEMBLIES_DIR', path.join(PACKAGE_ROOT, 'assemblies'), (raw) => ({ value: path.resolve(raw) })),
    workflowsDir: read('ABC_WORKFLOWS_DIR', path.join(PACKAGE_ROOT, 'workflows'), (raw) => ({ value: path.resolve(raw) })),
    timerSweepMs: ms('ABC_TIMER_SWEEP_MS', 1000),
    retentionSweepMs: ms('ABC_RETENTION_SWEEP_MS', 60_000),
    queuePollMs: ms('ABC_QUEUE_POLL_MS', 1000),
    migrationPollMs: ms('ABC_MIGRATION_POLL_MS', 2000),
    presenceTtlMs: ms('ABC_PRESENCE_TTL_MS', 30_000),
    keyRatePerSecond: read('ABC_KEY_RATE_PER_SECOND', 1000, parseLimitOrOff),
    tenantRatePerSecond: read('ABC_TENANT_RATE_PER_SECOND', 5000, parseLimitOrOff),
    tenantMaxRuns: read('ABC_TENANT_MAX_RUNS', 1000, parseLimitOrOff),
    corsOrigins: read('ABC_CORS_ORIGINS', [], parseOrigins),
    authFailuresPerMinute: read('ABC_AUTH_FAILURES_PER_MINUTE', 60, parsePositiveInt),
    trustedProxies: read('ABC_TRUSTED_PROXIES', [], (raw) => ({ value: raw.split(',').map((p) => p.trim()).filter(Boolean) })),
    secretGraceMs: ms('ABC_SECRET_GRACE_MS', 86_400_000),
    tlsCertFile: read<string | undefined>('ABC_TLS_CERT_FILE', undefined, (raw) => ({ value: path.resolve(raw) })),
    tlsKeyFile: read<string | undefined>('ABC_TLS_KEY_FILE', undefined, (raw) => ({ value: path.resolve(raw) })),
    tlsCaFile: read<string | undefined>('ABC_TLS_CA_FILE', undefined, (raw) => ({ value: path.resolve(raw) })),
  };
  if (Boolean(config.tlsCertFile) !== Boolean(config.tlsKeyFile)) {
    problems.push({ variable: config.tlsCertFile ? 'ABC_TLS_KEY_FILE' : 'ABC_TLS_CERT_FILE', message: 'TLS needs both ABC_TLS_CERT_FILE and ABC_TLS_KEY_FILE' });
  }
  if (config.tlsCaFile && !config.tlsCertFile) problems.push({ variable: 'ABC_TLS_CA_FILE', message: 'mutual TLS needs ABC_TLS_CERT_FILE and ABC_TLS_KEY_FILE too' });
  return problems.length ? { ok: false, problems } : { ok: true, config };
}

/** Every default, as a configuration read from an empty environment. */
export function defaultConfig(): Config {
  const result = loadConfig({});
  if (!result.ok) throw new Error(formatProblems(result.problems));
  return result.config;
}

/** What a core runs with: every setting required, all of them from the configuration. */
export function coreSettings(config: Config) {
  return {
    ...config.grpcAddr,
    publicBaseUrl: config.publicBaseUrl,
    agentHeartbeatIntervalMs: config.agentHeartbeatIntervalMs,
    agentUnhealthyAfterMs: config.agentUnhealthyAfterMs,
    agentIdleTimeoutMs: config.agentIdleTimeoutMs,
    runLeaseMs: config.runLeaseMs,
    drainTimeoutMs: config.shutdownGraceMs,
    imHelloTimeoutMs: config.imHelloTimeoutMs,
    agentTranscriptLimit: config.agentTranscriptLimit,
    agentConsequencesLimit: config.agentConsequencesLimit,
    a2aMaxDepth: config.a2aMaxDepth,
    policyFile: config.policyFile,
    toolsFile: config.toolsFile,
    workflowsDir: config.workflowsDir,
    metricsAddr: config.metricsAddr,
    grpcReflection: config.grpcReflection,
    toolTimeoutMs: config.toolTimeoutMs,
    toolStartDeferMs: config.toolStartDeferMs,
    approvalTimeoutMs: config.approvalTimeoutMs,
    idempotencyTtlMs: config.idempotencyTtlMs,
    timerSweepMs: config.timerSweepMs,
    migrationPollMs: config.migrationPollMs,
    presenceTtlMs: config.presenceTtlMs,
    rateLimits: {
      key: { perSecond: config.keyRatePerSecond, burst: config.keyRatePerSecond * 2 },
      tenant: { perSecond: config.tenantRatePerSecond, burst: config.tenantRatePerSecond * 2 },
    },
    tenantMaxRuns: config.tenantMaxRuns,
    secretGraceMs: config.secretGraceMs,
    retry: config.retry,
    llm: { routerUrl: config.llmRouterUrl, apiKey: config.llmRouterApiKey, timeoutMs: config.llmTimeoutMs, fallbacks: config.llmFallbacks, model: config.contractLlmModel },
    contracts: {
      workers: config.contractWorkers,
      syncExecutions: config.contractSyncExecutions,
      leaseMs: config.contractLeaseMs,
      ticketRetentionMs: config.ticketRetentionMs,
      stepConcurrency: config.engineStepConcurrency,
      stepStartDeferMs: config.stepStartDeferMs,
      retentionSweepMs: config.retentionSweepMs,
      pollIntervalMs: config.queuePollMs,
      contractsDir: config.contractsDir,
      assembliesDir: config.assembliesDir,
      engine: { human_timeout_ms: config.engineHumanTimeoutMs, max_consecutive_failures: config.engineMaxConsecutiveFailures } as Partial<EngineSettings>,
    },
  };
}

export type CoreSettings = ReturnType<typeof coreSettings>;

/** What a gateway runs with, besides where it listens and which core it speaks to. */
export function gatewaySettings(config: Config) {
  return { wsPingIntervalMs: config.wsPingIntervalMs, corsOrigins: config.corsOrigins, authFailuresPerMinute: config.authFailuresPerMinute, trustedProxies: config.trustedProxies };
}

/** Origins as a browser sends them: scheme://host[:port], comma-separated. */
function parseOrigins(raw: string): Parsed<string[]> {
  const origins = raw.split(',').map((o) => o.trim()).filter(Boolean);
  for (const o of origins) {
    let url: URL;
    try {
      url = new URL(o);
    } catch {
      return { error: `${o} is not an origin (scheme://host[:port])` };
    }
    if (url.origin !== o.replace(/\/$/, '')) return { error: `${o} is not an origin (scheme://host[:port], no path)` };
  }
  return { value: origins.map((o) => o.replace(/\/$/, '')) };
}

/** One line per problem, naming the variable, for a boot failure message. */
export function formatProblems(problems: ConfigProblem[]): string {
  return ['invalid configuration:', ...problems.map((p) => `  ${p.variable}: ${p.message}`)].join('\n');
}

/** Parses HOST:PORT or [IPv6]:PORT. Port 0 asks the OS for a free port. */
export function parseHostPort(raw: string): Parsed<HostPort> {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(raw);
  if (!match) return { error: `expected HOST:PORT, got "${raw}"` };
  const port = Number(match[3]);
  if (port > 65535) return { error: `port must be 0-65535, got ${port}` };
  return { value: { host: match[1] ?? match[2]!, port } };
}

function parseCoreAddr(raw: string): Parsed<string> {
  const bare = raw.replace(/^(grpc|http):\/\//, '').replace(/\/$/, '');
  const parsed = parseHostPort(bare);
  return 'error' in parsed ? parsed : { value: bare };
}

function parsePositiveInt(raw: string): Parsed<number> {
  const value = Number(raw);
  return /^\d+$/.test(raw) && value > 0 && Number.isSafeInteger(value)
    ? { value }
    : { error: `expected a positive integer, got "${raw}"` };
}

/** `gpt-4:gpt-4o-mini,claude:haiku:tiny` -> { 'gpt-4': ['gpt-4o-mini'], claude: ['haiku', 'tiny'] }. */
export function parseFallbacks(raw: string): Parsed<Record<string, string[]>> {
  const chains: Record<string, string[]> = {};
  for (const chain of raw.split(',').map((c) => c.trim()).filter(Boolean)) {
    const models = chain.split(':').map((m) => m.trim());
    if (models.length < 2 || models.some((m) => !m)) return { error: `each chain is MODEL:FALLBACK[:FALLBACK...], got "${chain}"` };
    chains[models[0]!] = models.slice(1);
  }
  return { value: chains };
}

function parseLimit(raw: string): Parsed<number> {
  return /^\d+$/.test(raw) && Number(raw) >= 1 && Number(raw) <= 100_000 ? { value: Number(raw) } : { error: `expected an integer 1-100000, got "${raw}"` };
}

/** A non-negative integer; `expected` names it in the error. */
const nonNegative = (expected: string) => (raw: string): Parsed<number> => (/^\d{1,9}$/.test(raw) ? { value: Number(raw) } : { error: `expected ${expected}, got "${raw}"` });
/** A limit: a non-negative integer, 0 meaning none. */
const parseLimitOrOff = nonNegative('a non-negative integer (0: no limit)');
const parseMsOrZero = nonNegative('milliseconds, 0 or more');

function parseCount(raw: string): Parsed<number> {
  return /^\d+$/.test(raw) && Number(raw) <= 100 ? { value: Number(raw) } : { error: `expected an integer 0-100, got "${raw}"` };
}

function parseFraction(raw: string): Parsed<number> {
  const value = Number(raw);
  return raw !== '' && Number.isFinite(value) && value >= 0 ? { value } : { error: `expected a non-negative number, got "${raw}"` };
}

function parseSwitch(raw: string): Parsed<boolean> {
  if (['true', 'on', '1'].includes(raw)) return { value: true };
  if (['false', 'off', '0'].includes(raw)) return { value: false };
  return { error: `expected true or false, got "${raw}"` };
}

function parseLogLevel(raw: string): Parsed<LogLevel> {
  return (LOG_LEVELS as readonly string[]).includes(raw)
    ? { value: raw as LogLevel }
    : { error: `must be one of ${LOG_LEVELS.join(', ')}, got "${raw}"` };
}

function parseDatabaseUrl(raw: string): Parsed<string> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { error: 'is not a valid URL; expected postgres://USER:PASSWORD@HOST:PORT/DATABASE' };
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    return { error: `must use postgres:// or postgresql://, got "${url.protocol}//"` };
  }
  if (!url.hostname) return { error: 'has no host' };
  if (url.pathname.length <= 1) return { error: 'names no database' };
  return { value: raw };
}

function parseHttpUrl(raw: string): Parsed<string> {
  try {
    const url = new URL(raw);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return { error: 'must be an http:// or https:// URL' };
    return { value: raw.replace(/\/$/, '') };
  } catch {
    return { error: `is not a valid URL: "${raw}"` };
  }
}

function parseApiKeys(raw: string): Parsed<string[]> {
  const keys = raw.split(',').map((k) => k.trim()).filter(Boolean);
  return keys.every((k) => k.length >= 16)
    ? { value: keys }
    : { error: 'every key must be at least 16 characters long' };
}
