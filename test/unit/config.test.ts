import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { formatProblems, loadConfig } from '../../src/config.js';

describe('configuration', () => {
  it('has the seed defaults when nothing is set', () => {
    const result = loadConfig({});
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.config).toMatchObject({
      databaseUrl: undefined,
      dbPoolIdleMs: 300_000,
      grpcAddr: { host: '127.0.0.1', port: 50051 },
      httpAddr: { host: '127.0.0.1', port: 8080 },
      coreAddr: '127.0.0.1:50051',
      toolTimeoutMs: 60_000,
      approvalTimeoutMs: 600_000,
      agentHeartbeatIntervalMs: 30_000,
      agentUnhealthyAfterMs: 90_000,
      wsPingIntervalMs: 30_000,
      idempotencyTtlMs: 86_400_000,
      logLevel: 'info',
    });
    expect(result.config.dataDir).toMatch(/\.abc$/);
    expect(result.config.gatewayThread).toBe(os.availableParallelism() > 1);
  });

  it('runs the gateway inline or on its own thread as told', () => {
    for (const [raw, value] of [['off', false], ['false', false], ['0', false], ['on', true], ['true', true], ['1', true]] as const) {
      const result = loadConfig({ ABC_GATEWAY_THREAD: raw });
      expect(result.ok && result.config.gatewayThread).toBe(value);
    }
  });

  it('takes a Unix socket directory for the database in the host parameter, as libpq does', () => {
    const url = 'postgres://u:p@localhost:5432/abc?host=%2Frun%2Fpostgresql';
    const result = loadConfig({ DATABASE_URL: url });
    expect(result.ok && result.config.databaseUrl).toBe(url);
  });

  it.each([
    ['ABC_HTTP_ADDR', '127.0.0.1:99999', /port must be 0-65535/],
    ['ABC_GRPC_ADDR', 'localhost', /expected HOST:PORT/],
    ['DATABASE_URL', 'not a url', /not a valid URL/],
    ['DATABASE_URL', 'mysql://u:p@h:3306/db', /postgres:\/\//],
    ['DATABASE_URL', 'postgres://u:p@h:5432', /names no database/],
    ['TOOL_TIMEOUT_MS', '-5', /positive integer/],
    ['APPROVAL_TIMEOUT_MS', '10m', /positive integer/],
    ['LOG_LEVEL', 'loud', /must be one of/],
    ['ABC_GATEWAY_THREAD', 'maybe', /expected true or false/],
    ['LLM_ROUTER_URL', 'ftp://x', /http/],
    ['ABC_API_KEYS', 'short', /at least 16/],
    ['ORCHESTRATOR_URL', 'core', /HOST:PORT/],
    ['ABC_STEP_START_DEFER_MS', '-1', /milliseconds, 0 or more/],
    ['ABC_DB_POOL_IDLE_MS', '5m', /milliseconds, 0 or more/],
    ['ABC_TENANT_MAX_RUNS', '1.5', /non-negative integer \(0: no limit\)/],
  ])('rejects %s=%s, naming the variable', (variable, value, message) => {
    const result = loadConfig({ [variable]: value });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems).toEqual([{ variable, message: expect.stringMatching(message) }]);
    expect(formatProblems(result.problems)).toContain(`${variable}: `);
  });

  it('reports every bad variable at once', () => {
    const result = loadConfig({ ABC_HTTP_ADDR: 'x', DATABASE_URL: 'nope', LOG_LEVEL: 'loud' });
    expect(result.ok ? [] : result.problems.map((p) => p.variable).sort()).toEqual(['ABC_HTTP_ADDR', 'DATABASE_URL', 'LOG_LEVEL']);
  });

  it('accepts valid values', () => {
    const result = loadConfig({
      DATABASE_URL: 'postgresql://u:p@db:5432/platform',
      ABC_HTTP_ADDR: '0.0.0.0:0',
      ABC_GRPC_ADDR: '[::1]:6000',
      ORCHESTRATOR_URL: 'http://core:8081',
      ABC_API_KEYS: 'key-one-0123456789, key-two-0123456789',
      LOG_LEVEL: 'debug',
      ABC_STEP_START_DEFER_MS: '0',
      ABC_DB_POOL_IDLE_MS: '0',
    });
    expect(result.ok && result.config).toMatchObject({
      databaseUrl: 'postgresql://u:p@db:5432/platform',
      httpAddr: { host: '0.0.0.0', port: 0 },
      grpcAddr: { host: '::1', port: 6000 },
      coreAddr: 'core:8081',
      apiKeys: ['key-one-0123456789', 'key-two-0123456789'],
      stepStartDeferMs: 0,
      dbPoolIdleMs: 0,
      logLevel: 'debug',
    });
  });
});
