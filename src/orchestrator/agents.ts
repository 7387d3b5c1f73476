// The agent registry and its health monitor (seed 001 §7.3, §11).
// Health checks are deadline rows claimed with SKIP LOCKED, so any number of
// core replicas can share the work without checking an agent twice.
import type { SecretBox } from '../access/secret-box.js';
import type { Secrets } from '../access/secrets.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../runtime/log.js';
import { claimDueAgents, plaintextTokens, recordCheckFailure, recordCheckSuccess, replaceToken, type AgentRow } from '../store/agent-store.js';

export * from '../store/agent-store.js';
import { every, type Ticker } from '../runtime/ticker.js';

/** How long one GET /health may take, unless HealthOptions says otherwise. */
const HEALTH_CHECK_TIMEOUT_MS = 5000;

export interface HealthOptions {
  em: () => EntityManager;
  log: Logger;
  intervalMs: number;
  unhealthyAfterMs: number;
  /** Opens agents' tokens (secrets of their tenant). */
  secrets: Secrets;
  /** Timeout of one GET /health. */
  checkTimeoutMs?: number;
}

/** Calls GET {endpoint}/health once and records the outcome. */
export async function checkAgent(opts: HealthOptions, agent: Pick<AgentRow, 'tenantId' | 'agentId' | 'endpoint' | 'authToken'>): Promise<AgentRow | null> {
  let failure: string | null = null;
  try {
    const res = await fetch(`${agent.endpoint}/health`, {
      headers: agent.authToken ? { authorization: `Bearer ${await opts.secrets.agentToken(agent.tenantId, agent.authToken)}` } : {},
      signal: AbortSignal.timeout(opts.checkTimeoutMs ?? HEALTH_CHECK_TIMEOUT_MS),
    });
    await res.body?.cancel();
    if (!res.ok) failure = `GET /health answered ${res.status}`;
  } catch (error) {
    failure = `GET /health failed: ${(error as Error).message}`;
  }
  const checked = failure ? await recordCheckFailure(opts.em(), agent, failure, opts.unhealthyAfterMs) : await recordCheckSuccess(opts.em(), agent);
  if (!checked) return null;
  // Logged once per change, not at every check.
  const who = { tenantId: agent.tenantId, agentId: agent.agentId };
  if (checked.was === 'healthy' && checked.agent.status === 'unhealthy') opts.log.warn({ ...who, failure }, 'agent unhealthy');
  if (checked.was === 'unhealthy' && checked.agent.status === 'healthy') opts.log.info(who, 'agent healthy again');
  return checked.agent;
}

/** Claims agents whose check is due (SKIP LOCKED), pushes their deadline, checks them. */
export async function checkDueAgents(opts: HealthOptions): Promise<number> {
  const due = await claimDueAgents(opts.em(), opts.intervalMs);
  await Promise.all(due.map((a) => checkAgent(opts, a)));
  return due.length;
}

/** Runs checkDueAgents on a timer until stopped. */
export function startHealthMonitor(opts: HealthOptions & { tickMs?: number }): Ticker {
  return every(opts.tickMs ?? Math.min(1000, opts.intervalMs), () => checkDueAgents(opts), opts.log, 'agent health sweep');
}

/** Seals tokens stored in plaintext before secrets were encrypted at rest. */
export async function sealLegacyTokens(em: EntityManager, secrets: SecretBox): Promise<number> {
  const rows = await plaintextTokens(em);
  for (const row of rows) await replaceToken(em, { tenantId: row.tenant_id, agentId: row.agent_id }, row.auth_token, secrets.seal(row.auth_token));
  return rows.length;
}
