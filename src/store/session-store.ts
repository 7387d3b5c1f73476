// Sessions and their transcripts (seed 001 §7.4).
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError, invalidRequest } from '../domain/errors.js';
import { executeOne } from './native.js';
import { newId } from '../runtime/new-id.js';

export interface MessageRow {
  messageId: string;
  sessionId: string;
  runId: string | null;
  role: string;
  content: string;
  createdAt: Date;
  metadata: Record<string, unknown> | null;
}

/** A messages row as PostgreSQL answers it. */
export interface RawMessage {
  message_id: string;
  session_id: string;
  run_id: string | null;
  role: string;
  content: string;
  created_at: Date;
  metadata: Record<string, unknown> | null;
}

export const toMessage = (r: RawMessage): MessageRow => ({
  messageId: r.message_id,
  sessionId: r.session_id,
  runId: r.run_id,
  role: r.role,
  content: r.content,
  createdAt: new Date(r.created_at),
  metadata: r.metadata,
});

export const ROLES = ['user', 'assistant', 'system'] as const;

/** Creates the session when new. Returns its owner: a session belongs to one user of one tenant. */
export async function ensureSession(tx: EntityManager, sessionId: string, userId: string, tenantId: string): Promise<{ userId: string; tenantId: string }> {
  const [row] = await tx.execute<{ user_id: string; tenant_id: string }[]>(
    `INSERT INTO sessions (session_id, user_id, tenant_id) VALUES (?, ?, ?)
     ON CONFLICT (session_id) DO UPDATE SET session_id = EXCLUDED.session_id RETURNING user_id, tenant_id`,
    [sessionId, userId, tenantId],
  );
  return { userId: row!.user_id, tenantId: row!.tenant_id };
}

export async function getSession(em: EntityManager, sessionId: string) {
  const [row] = await em.execute<{ session_id: string; user_id: string; tenant_id: string; created_at: Date; metadata: Record<string, unknown> | null }[]>(
    'SELECT session_id, user_id, tenant_id, created_at, metadata FROM sessions WHERE session_id = ?',
    [sessionId],
  );
  return row ? { sessionId: row.session_id, userId: row.user_id, tenantId: row.tenant_id, createdAt: new Date(row.created_at), metadata: row.metadata } : null;
}

export async function appendMessage(
  tx: EntityManager,
  msg: { sessionId: string; role: string; content: string; runId?: string | null; metadata?: Record<string, unknown> | null },
): Promise<MessageRow> {
  if (!(ROLES as readonly string[]).includes(msg.role)) throw invalidRequest(`role must be one of ${ROLES.join(', ')}`, 'role');
  const [row] = await tx.execute<RawMessage[]>(
    `INSERT INTO messages (message_id, session_id, run_id, role, content, metadata, created_at)
     VALUES (?, ?, ?, ?, ?, ?::jsonb, clock_timestamp()) RETURNING *`,
    [newId('msg'), msg.sessionId, msg.runId ?? null, msg.role, msg.content, msg.metadata ? JSON.stringify(msg.metadata) : null],
  );
  return toMessage(row!);
}

/** The newest `limit` messages before `before` (a message id), oldest first. */
export async function listMessages(
  em: EntityManager,
  sessionId: string,
  limit: number,
  before?: string,
): Promise<{ messages: MessageRow[]; hasMore: boolean }> {
  const params: unknown[] = [sessionId];
  let cursor = '';
  if (before) {
    const [anchor] = await em.execute<{ created_at: Date }[]>('SELECT created_at FROM messages WHERE message_id = ? AND session_id = ?', [before, sessionId]);
    if (!anchor) throw new AbcError('INVALID_ARGUMENT', { code: 'invalid_request', message: `before: no message ${before} in this session`, details: { field: 'before' } });
    cursor = 'AND (created_at, message_id) < (?, ?)';
    params.push(anchor.created_at, before);
  }
  params.push(limit + 1);
  const rows = await executeOne<RawMessage>(
    em,
    `SELECT * FROM messages WHERE session_id = ? ${cursor} ORDER BY created_at DESC, message_id DESC LIMIT ?`,
    params,
  );
  const hasMore = rows.length > limit;
  return { messages: rows.slice(0, limit).reverse().map(toMessage), hasMore };
}
