// The append-only event log. Appends run inside the caller's transaction, so a
// state change and its events commit together; watchers are woken after commit
// by NOTIFY and then read the log from their cursor, so nothing is lost or repeated.
import { performance } from 'node:perf_hooks';
import { metrics } from '../runtime/metrics.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../runtime/new-id.js';

export const EVENTS_CHANNEL = 'abc_events';

export interface NewEvent {
  type: string;
  payload?: Record<string, unknown>;
  /** Milliseconds since the epoch; defaults to now. */
  ts?: number;
  /** Set by a writer that may retry, so a retry can tell whether its batch already committed. */
  eventId?: string;
}

export interface StoredEvent {
  /** The global cursor (BIGSERIAL), as a string. */
  id: string;
  eventId: string;
  runId: string;
  sessionId: string;
  seq: number;
  ts: number;
  type: string;
  payload: Record<string, unknown>;
}

interface EventRow {
  id: string;
  event_id: string;
  run_id: string;
  session_id: string;
  seq: number;
  ts: string;
  type: string;
  payload: Record<string, unknown> | null;
}

const toEvent = (r: EventRow): StoredEvent => ({
  id: String(r.id),
  eventId: r.event_id,
  runId: r.run_id,
  sessionId: r.session_id,
  seq: r.seq,
  ts: Number(r.ts),
  type: r.type,
  payload: r.payload ?? {},
});

/**
 * Appends events to a run, in one statement: inside the caller's transaction
 * `tx`, or atomically on its own. Locks the run row (for a gap-free seq) and then
 * its session row, so events of one session commit in cursor order and a
 * session-wide watcher can never skip one. With `onlyIfActive`, events of a run
 * that has ended are dropped (late deltas).
 */
export async function appendEvents(
  tx: EntityManager,
  runId: string,
  events: NewEvent[],
  opts: { onlyIfActive?: boolean } = {},
): Promise<StoredEvent[]> {
  if (events.length === 0) return [];
  const now = Date.now();
  // One JSON document for the whole batch (the driver would expand array parameters).
  const batch = events.map((e, i) => ({ event_id: e.eventId ?? newId('evt'), i: i + 1, ts: e.ts ?? now, type: e.type, payload: e.payload ?? {} }));
  const started = performance.now();
  const rows = await tx.execute<EventRow[]>(
    `WITH run AS (
       UPDATE runs SET last_seq = last_seq + ? WHERE run_id = ?
       ${opts.onlyIfActive ? "AND status NOT IN ('DONE', 'FAILED', 'CANCELLED')" : ''}
       RETURNING last_seq, session_id
     ), locked AS (
       SELECT s.session_id FROM sessions s JOIN run ON s.session_id = run.session_id FOR UPDATE OF s
     ), added AS (
       INSERT INTO events (event_id, run_id, session_id, seq, ts, type, payload)
       SELECT e.event_id, ?, locked.session_id, run.last_seq - ? + e.i, e.ts, e.type, e.payload
       FROM run, locked, jsonb_to_recordset(?::jsonb) AS e(event_id text, i int, ts bigint, type text, payload jsonb)
       ORDER BY e.i
       RETURNING id, event_id, run_id, session_id, seq, ts, type, payload
     ), notified AS (
       SELECT pg_notify(?, max(session_id) || ' ' || max(run_id) || ' ' || max(id)) FROM added HAVING count(*) > 0
     )
     SELECT added.* FROM added, notified`,
    [events.length, runId, runId, events.length, JSON.stringify(batch), EVENTS_CHANNEL],
  );
  metrics.eventAppend.observe((performance.now() - started) / 1000);
  metrics.eventBatch.observe(events.length);
  if (rows.length === 0 && !opts.onlyIfActive) throw new Error(`cannot append events: run ${runId} does not exist`);
  return rows.map(toEvent).sort((a, b) => a.seq - b.seq);
}

export interface EventFilter {
  runId?: string;
  sessionId?: string;
  types?: string[];
  /** Types to leave out, e.g. `execution_state`. */
  excludeTypes?: string[];
  afterTs?: number;
}

/** Events matching `filter` with a cursor greater than `after`, in cursor order. */
export async function readEvents(em: EntityManager, filter: EventFilter, after: string, limit: number): Promise<StoredEvent[]> {
  const where: string[] = ['id > ?'];
  const params: unknown[] = [after || '0'];
  if (filter.runId) where.push('run_id = ?'), params.push(filter.runId);
  if (filter.sessionId) where.push('session_id = ?'), params.push(filter.sessionId);
  if (filter.types?.length) where.push('type IN (SELECT jsonb_array_elements_text(?::jsonb))'), params.push(JSON.stringify(filter.types));
  if (filter.excludeTypes?.length) where.push('type NOT IN (SELECT jsonb_array_elements_text(?::jsonb))'), params.push(JSON.stringify(filter.excludeTypes));
  if (filter.afterTs) where.push('ts > ?'), params.push(filter.afterTs);
  params.push(limit);
  const rows = await em.execute<EventRow[]>(
    `SELECT id, event_id, run_id, session_id, seq, ts, type, payload FROM events WHERE ${where.join(' AND ')} ORDER BY id LIMIT ?`,
    params,
  );
  return rows.map(toEvent);
}

/** Whether an event with this id was committed. */
export async function eventExists(em: EntityManager, eventId: string): Promise<boolean> {
  const rows = await em.execute<unknown[]>('SELECT 1 FROM events WHERE event_id = ?', [eventId]);
  return rows.length > 0;
}
