// The agents table (seed 001 §7.3): registration, heartbeats and reads. Its health monitor is orchestrator/agents.ts.
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError, invalidRequest } from '../domain/errors.js';
import { executeOne } from './native.js';

export interface AgentRow {
  tenantId: string;
  agentId: string;
  name: string;
  endpoint: string;
  capabilities: string[];
  /** It continues a run from `context.resume` after its core was lost mid-stream. */
  resumable: boolean;
  status: 'healthy' | 'unhealthy';
  statusReason: string | null;
  lastHeartbeat: Date | null;
  createdAt: Date;
  authToken: string | null;
  ownerKeyId: string | null;
}

export interface RawAgent {
  tenant_id: string;
  agent_id: string;
  name: string;
  endpoint: string;
  capabilities: string[] | null;
  resumable: boolean;
  status: 'healthy' | 'unhealthy';
  status_reason: string | null;
  last_heartbeat: Date | null;
  created_at: Date;
  auth_token: string | null;
  owner_key_id: string | null;
}

export const toAgent = (r: RawAgent): AgentRow => ({
  tenantId: r.tenant_id,
  agentId: r.agent_id,
  name: r.name,
  endpoint: r.endpoint,
  capabilities: r.capabilities ?? [],
  resumable: r.resumable,
  status: r.status,
  statusReason: r.status_reason,
  lastHeartbeat: r.last_heartbeat ? new Date(r.last_heartbeat) : null,
  createdAt: new Date(r.created_at),
  authToken: r.auth_token,
  ownerKeyId: r.owner_key_id,
});

/** An agent's key: its tenant and its id. */
export type AgentKey = Pick<AgentRow, 'tenantId' | 'agentId'>;

export interface AgentRegistration {
  tenantId: string;
  agentId: string;
  /** The key registering it. */
  ownerKeyId: string | null;
  name: string;
  endpoint: string;
  capabilities: string[];
  resumable?: boolean;
  auth?: { type: string; token: string };
  metadata?: Record<string, unknown>;
}

/** Checks a registration; the error names the field. */
export function checkRegistration(reg: Pick<AgentRegistration, 'agentId' | 'name' | 'endpoint'>): void {
  if (!/^[A-Za-z0-9._:-]{1,64}$/.test(reg.agentId)) throw invalidRequest('agent_id must be 1-64 of A-Z a-z 0-9 . _ : -', 'agent_id');
  if (!reg.name) throw invalidRequest('name is required', 'name');
  let url: URL;
  try {
    url = new URL(reg.endpoint);
  } catch {
    throw invalidRequest('endpoint must be an absolute http(s) URL', 'endpoint');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalidRequest('endpoint must be an http(s) URL', 'endpoint');
}

/** Creates or replaces an agent. Registering counts as a heartbeat. */
export async function registerAgent(em: EntityManager, reg: AgentRegistration): Promise<AgentRow> {
  checkRegistration(reg);
  const [row] = await em.execute<RawAgent[]>(
    `INSERT INTO agents (tenant_id, agent_id, owner_key_id, name, endpoint, capabilities, resumable, status, last_heartbeat, auth_type, auth_token, metadata, next_check_at)
     VALUES (?, ?, ?, ?, ?, ?::jsonb, ?, 'healthy', now(), ?, ?, ?::jsonb, now())
     ON CONFLICT (tenant_id, agent_id) DO UPDATE SET name = EXCLUDED.name, endpoint = EXCLUDED.endpoint,
       capabilities = EXCLUDED.capabilities, resumable = EXCLUDED.resumable, status = 'healthy', status_reason = NULL, last_heartbeat = now(),
       auth_type = EXCLUDED.auth_type, auth_token = EXCLUDED.auth_token, metadata = EXCLUDED.metadata, next_check_at = now()
     RETURNING *`,
    [reg.tenantId, reg.agentId, reg.ownerKeyId, reg.name, reg.endpoint.replace(/\/$/, ''), JSON.stringify(reg.capabilities), reg.resumable ?? false, reg.auth?.type ?? null, reg.auth?.token ?? null, reg.metadata ? JSON.stringify(reg.metadata) : null],
  );
  return toAgent(row!);
}

export async function listAgents(em: EntityManager, tenantId: string): Promise<AgentRow[]> {
  return (await em.execute<RawAgent[]>('SELECT * FROM agents WHERE tenant_id = ? ORDER BY agent_id', [tenantId])).map(toAgent);
}

/** The columns an agent's row maps. */
const AGENT_COLUMNS = 'tenant_id, agent_id, name, endpoint, capabilities, resumable, status, status_reason, last_heartbeat, created_at, auth_token, owner_key_id';

export async function getAgent(em: EntityManager, tenantId: string, agentId: string): Promise<AgentRow | null> {
  const [row] = await executeOne<RawAgent>(em, `SELECT ${AGENT_COLUMNS} FROM agents WHERE tenant_id = ? AND agent_id = ?`, [tenantId, agentId]);
  return row ? toAgent(row) : null;
}

/** Removes an agent of the tenant; its runs keep its id. Null when there was none. */
export async function deleteAgent(em: EntityManager, tenantId: string, agentId: string): Promise<AgentRow | null> {
  const [row] = await em.execute<RawAgent[]>('DELETE FROM agents WHERE tenant_id = ? AND agent_id = ? RETURNING *', [tenantId, agentId]);
  return row ? toAgent(row) : null;
}

/** Records a successful contact with the agent. */
export async function heartbeat(em: EntityManager, tenantId: string, agentId: string): Promise<AgentRow> {
  const [row] = await em.execute<RawAgent[]>(
    "UPDATE agents SET last_heartbeat = now(), status = 'healthy', status_reason = NULL WHERE tenant_id = ? AND agent_id = ? RETURNING *",
    [tenantId, agentId],
  );
  if (!row) throw new AbcError('NOT_FOUND', { code: 'not_found', message: `agent ${agentId} is not registered` });
  return toAgent(row);
}

/** An agent that may be invoked, or an `agent_error` naming why not. */
export async function invocableAgent(em: EntityManager, tenantId: string, agentId: string): Promise<AgentRow> {
  const agent = await getAgent(em, tenantId, agentId);
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


/** An agent after a health check, and its status before it. */
export interface CheckedAgent {
  agent: AgentRow;
  was: AgentRow['status'];
}

/** A failed health check: the agent turns unhealthy once it has been silent for `unhealthyAfterMs`. */
export async function recordCheckFailure(em: EntityManager, agent: AgentKey, failure: string, unhealthyAfterMs: number): Promise<CheckedAgent | null> {
  return checked(em, `status_reason = ?, status = CASE WHEN coalesce(a.last_heartbeat, a.created_at) < now() - (? * interval '1 millisecond') THEN 'unhealthy' ELSE a.status END`, [failure, unhealthyAfterMs], agent);
}

export async function recordCheckSuccess(em: EntityManager, agent: AgentKey): Promise<CheckedAgent | null> {
  return checked(em, "last_heartbeat = now(), status = 'healthy', status_reason = NULL", [], agent);
}

async function checked(em: EntityManager, set: string, params: unknown[], agent: AgentKey): Promise<CheckedAgent | null> {
  const [row] = await em.execute<(RawAgent & { was: AgentRow['status'] })[]>(
    `UPDATE agents a SET ${set} FROM (SELECT status FROM agents WHERE tenant_id = ? AND agent_id = ? FOR UPDATE) old
     WHERE a.tenant_id = ? AND a.agent_id = ? RETURNING a.*, old.status AS was`,
    [...params, agent.tenantId, agent.agentId, agent.tenantId, agent.agentId],
  );
  return row ? { agent: toAgent(row), was: row.was } : null;
}

/** Claims up to 50 agents whose check is due (SKIP LOCKED) and pushes their next check by `intervalMs`. */
export async function claimDueAgents(em: EntityManager, intervalMs: number): Promise<AgentRow[]> {
  const rows = await em.execute<RawAgent[]>(
    `UPDATE agents SET next_check_at = now() + (? * interval '1 millisecond')
     WHERE (tenant_id, agent_id) IN (SELECT tenant_id, agent_id FROM agents WHERE next_check_at <= now() ORDER BY next_check_at LIMIT 50 FOR UPDATE SKIP LOCKED)
     RETURNING *`,
    [intervalMs],
  );
  return rows.map(toAgent);
}

/** Tokens stored in plaintext before secrets were sealed at rest (not sealed `v1:`, not a store reference `secret:`). */
export const plaintextTokens = (em: EntityManager) =>
  em.execute<{ tenant_id: string; agent_id: string; auth_token: string }[]>("SELECT tenant_id, agent_id, auth_token FROM agents WHERE auth_token IS NOT NULL AND auth_token NOT LIKE 'v1:%' AND auth_token NOT LIKE 'secret:%'");

export async function replaceToken(em: EntityManager, agent: AgentKey, from: string, to: string): Promise<void> {
  await em.execute('UPDATE agents SET auth_token = ? WHERE tenant_id = ? AND agent_id = ? AND auth_token = ?', [to, agent.tenantId, agent.agentId, from]);
}
