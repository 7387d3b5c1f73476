// Generated messages -> the JSON shapes of the seeds (snake_case, plain enum names).
import type { Event } from '../gen/abc/common/v1/types.js';
import type { Agent } from '../gen/abc/orchestrator/v1/agent.js';
import type { ContextBlob } from '../gen/abc/orchestrator/v1/context.js';
import type { Run } from '../gen/abc/orchestrator/v1/run.js';
import type { Message } from '../gen/abc/orchestrator/v1/session.js';

/** `RUN_STATUS_RUNNING` -> `RUNNING`. */
export const plainEnum = (value: string, prefix: string) => value.replace(new RegExp(`^${prefix}_`), '');

export const eventJson = (e: Event) => ({
  event_id: e.eventId,
  run_id: e.runId,
  session_id: e.sessionId,
  seq: e.seq,
  cursor: e.cursor,
  ts: e.ts,
  type: e.type,
  payload: e.payload ?? {},
});

export const agentJson = (a: Agent) => ({
  agent_id: a.agentId,
  name: a.name,
  endpoint: a.endpoint,
  capabilities: a.capabilities,
  resumable: a.resumable,
  status: plainEnum(a.status, 'AGENT_STATUS').toLowerCase(),
  status_reason: a.statusReason || null,
  last_heartbeat_at: a.lastHeartbeatAt || null,
  registered_at: a.registeredAt,
});

export const runJson = (r: Run) => ({
  run_id: r.runId,
  session_id: r.sessionId,
  root_agent_id: r.rootAgentId,
  parent_run_id: r.parentRunId || null,
  status: plainEnum(r.status, 'RUN_STATUS'),
  started_at: r.startedAt,
  ended_at: r.endedAt || null,
  error: r.error ? { code: r.error.code, message: r.error.message, retryable: r.error.retryable, details: r.error.details ?? {} } : null,
  request_id: r.requestId || null,
  trace_id: r.traceId,
});

export const messageJson = (m: Message) => ({
  message_id: m.messageId,
  session_id: m.sessionId,
  run_id: m.runId || null,
  role: m.role,
  content: m.content,
  created_at: m.createdAt,
  metadata: m.metadata ?? null,
});

export const blobJson = (b: ContextBlob) => ({
  context_key: b.contextKey,
  owner_type: b.ownerType,
  owner_id: b.ownerId,
  version: b.version,
  data: b.data ?? null,
  created_at: b.createdAt,
  updated_at: b.updatedAt,
});
