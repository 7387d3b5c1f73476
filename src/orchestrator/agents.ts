// The agent registry and its health monitor (seed 001 §7.3, §11).
// Health checks are deadline rows claimed with SKIP LOCKED, so any number of
// core replicas can share the work without checking an agent twice.
import type { SecretBox } from '../access/secret-box.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../runtime/log.js';
import { toAgent, type AgentRow, type RawAgent } from '../store/agent-store.js';

export * from '../store/agent-store.js';
import { every, type Ticker } from '../runtime/ticker.js';

export interface HealthOptions {
  em: () => EntityManager;
  log: Logger;
  intervalMs: number;
  unhealthyAfterMs: number;
  /** Opens agents' sealed tokens. */
  secrets: SecretBox;
  /** Timeout of one GET /health. */
  checkTimeoutMs?: number;
}

/** Calls GET {endpoint}/health once and records the outcome. */
export async function checkAgent(opts: HealthOptions, agent: Pick<AgentRow, 'agentId' | 'endpoint' | 'authToken'>): Promise<AgentRow | null> {
  let failure: string | null = null;
  try {
    const res = await fetch(`${agent.endpoint}/health`, {
      headers: agent.authToken ? { authorization: `Bearer ${opts.secrets.open(agent.authToken)}` } : {},
      signal: AbortSignal.timeout(opts.checkTimeoutMs ?? 5000),
    });
    await res.body?.cancel();
    if (!res.ok) failure = `GET /health answered ${res.status}`;
  } catch (error) {
    failure = `GET /health failed: ${(error as Error).message}`;
  }
  const [row] = failure
    ? await opts.em().execute<RawAgent[]>(
        `UPDATE agents SET status_reason = ?,
           status = CASE WHEN coalesce(last_heartbeat, created_at) < now() - (? * interval '1 millisecond') THEN 'unhealthy' ELSE status END
         WHERE agent_id = ? RETURNING *`,
        [failure, opts.unhealthyAfterMs, agent.agentId],
      )
    : await opts.em().execute<RawAgent[]>(
        "UPDATE agents SET last_heartbeat = now(), status = 'healthy', status_reason = NULL WHERE agent_id = ? RETURNING *",
        [agent.agentId],
      );
  if (row && row.status === 'unhealthy' && failure) opts.log.warn({ agentId: agent.agentId, failure }, 'agent unhealthy');
  return row ? toAgent(row) : null;
}

/** Claims agents whose check is due (SKIP LOCKED), pushes their deadline, checks them. */
export async function checkDueAgents(opts: HealthOptions): Promise<number> {
  const due = await opts.em().execute<RawAgent[]>(
    `UPDATE agents SET next_check_at = now() + (? * interval '1 millisecond')
     WHERE agent_id IN (SELECT agent_id FROM agents WHERE next_check_at <= now() ORDER BY next_check_at LIMIT 50 FOR UPDATE SKIP LOCKED)
     RETURNING *`,
    [opts.intervalMs],
  );
  await Promise.all(due.map((r) => checkAgent(opts, toAgent(r))));
  return due.length;
}

/** Runs checkDueAgents on a timer until stopped. */
export function startHealthMonitor(opts: HealthOptions & { tickMs?: number }): Ticker {
  return every(opts.tickMs ?? Math.min(1000, opts.intervalMs), () => checkDueAgents(opts), opts.log, 'agent health sweep');
}

/** Seals tokens stored in plaintext before secrets were encrypted at rest. */
export async function sealLegacyTokens(em: EntityManager, secrets: SecretBox): Promise<number> {
  const rows = await em.execute<{ agent_id: string; auth_token: string }[]>("SELECT agent_id, auth_token FROM agents WHERE auth_token IS NOT NULL AND auth_token NOT LIKE 'v1:%'");
  for (const row of rows) {
    await em.execute('UPDATE agents SET auth_token = ? WHERE agent_id = ? AND auth_token = ?', [secrets.seal(row.auth_token), row.agent_id, row.auth_token]);
  }
  return rows.length;
}
