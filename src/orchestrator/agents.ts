// The agent registry and its health monitor (seed 001 §7.3, §11).
// Health checks are deadline rows claimed with SKIP LOCKED, so any number of
// core replicas can share the work without checking an agent twice.
import type { SecretBox } from '../access/secret-box.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError, invalidRequest } from '../domain/errors.js';
import type { Logger } from '../log.js';
import { every, type Ticker } from '../ticker.js';

export interface AgentRow {
  agentId: string;
  name: string;
  endpoint: string;
  capabilities: string[];
  status: 'healthy' | 'unhealthy';
  statusReason: string | null;
  lastHeartbeat: Date | null;
  createdAt: Date;
  authToken: string | null;
}

interface RawAgent {
  agent_id: string;
  name: string;
  endpoint: string;
  capabilities: string[] | null;
  status: 'healthy' | 'unhealthy';
  status_reason: string | null;
  last_heartbeat: Date | null;
  created_at: Date;
  auth_token: string | null;
}

const toAgent = (r: RawAgent): AgentRow => ({
  agentId: r.agent_id,
  name: r.name,
  endpoint: r.endpoint,
  capabilities: r.capabilities ?? [],
  status: r.status,
  statusReason: r.status_reason,
  lastHeartbeat: r.last_heartbeat ? new Date(r.last_heartbeat) : null,
  createdAt: new Date(r.created_at),
  authToken: r.auth_token,
});

export interface AgentRegistration {
  agentId: string;
  name: string;
  endpoint: string;
  capabilities: string[];
  auth?: { type: string; token: string };
  metadata?: Record<string, unknown>;
}

/** Creates or replaces an agent. Registering counts as a heartbeat. */
export async function registerAgent(em: EntityManager, reg: AgentRegistration): Promise<AgentRow> {
  if (!/^[A-Za-z0-9._:-]{1,64}$/.test(reg.agentId)) throw invalidRequest('agent_id must be 1-64 of A-Z a-z 0-9 . _ : -', 'agent_id');
  if (!reg.name) throw invalidRequest('name is required', 'name');
  let url: URL;
  try {
    url = new URL(reg.endpoint);
  } catch {
    throw invalidRequest('endpoint must be an absolute http(s) URL', 'endpoint');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalidRequest('endpoint must be an http(s) URL', 'endpoint');
  const [row] = await em.execute<RawAgent[]>(
    `INSERT INTO agents (agent_id, name, endpoint, capabilities, status, last_heartbeat, auth_type, auth_token, metadata, next_check_at)
     VALUES (?, ?, ?, ?::jsonb, 'healthy', now(), ?, ?, ?::jsonb, now())
     ON CONFLICT (agent_id) DO UPDATE SET name = EXCLUDED.name, endpoint = EXCLUDED.endpoint,
       capabilities = EXCLUDED.capabilities, status = 'healthy', status_reason = NULL, last_heartbeat = now(),
       auth_type = EXCLUDED.auth_type, auth_token = EXCLUDED.auth_token, metadata = EXCLUDED.metadata, next_check_at = now()
     RETURNING *`,
    [reg.agentId, reg.name, reg.endpoint.replace(/\/$/, ''), JSON.stringify(reg.capabilities), reg.auth?.type ?? null, reg.auth?.token ?? null, reg.metadata ? JSON.stringify(reg.metadata) : null],
  );
  return toAgent(row!);
}

export async function listAgents(em: EntityManager): Promise<AgentRow[]> {
  return (await em.execute<RawAgent[]>('SELECT * FROM agents ORDER BY agent_id')).map(toAgent);
}

export async function getAgent(em: EntityManager, agentId: string): Promise<AgentRow | null> {
  const [row] = await em.execute<RawAgent[]>('SELECT * FROM agents WHERE agent_id = ?', [agentId]);
  return row ? toAgent(row) : null;
}

/** Records a successful contact with the agent. */
export async function heartbeat(em: EntityManager, agentId: string): Promise<AgentRow> {
  const [row] = await em.execute<RawAgent[]>(
    "UPDATE agents SET last_heartbeat = now(), status = 'healthy', status_reason = NULL WHERE agent_id = ? RETURNING *",
    [agentId],
  );
  if (!row) throw new AbcError('NOT_FOUND', { code: 'not_found', message: `agent ${agentId} is not registered` });
  return toAgent(row);
}

/** An agent that may be invoked, or an `agent_error` naming why not. */
export async function invocableAgent(em: EntityManager, agentId: string): Promise<AgentRow> {
  const agent = await getAgent(em, agentId);
  if (!agent) {
    throw new AbcError('NOT_FOUND', { code: 'agent_error', category: 'EXECUTION', message: `agent ${agentId} is not registered`, details: { reason: 'unknown_agent', agent_id: agentId } });
  }
  if (agent.status !== 'healthy') {
    throw new AbcError('UNAVAILABLE', {
      code: 'agent_error',
      category: 'EXECUTION',
      message: `agent ${agentId} is unhealthy${agent.statusReason ? `: ${agent.statusReason}` : ''}`,
      details: { reason: 'unhealthy_agent', agent_id: agentId },
    });
  }
  return agent;
}

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
