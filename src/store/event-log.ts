// The append-only event log. Appends run inside the caller's transaction, so a
// state change and its events commit together; watchers are woken after commit
// by NOTIFY and then read the log from their cursor, so nothing is lost or repeated.
import { performance } from 'node:perf_hooks';
import { metrics } from '../runtime/metrics.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../runtime/new-id.js';
import { inJsonList, prepared, type Queryable } from './native.js';

export const EVENTS_CHANNEL = 'abc_events';

/**
 * The channel a commit of events notifies in its statement: none for a writer
 * with an origin (an event bus's), which announces the commit after it
 * (EventBus.publish), so the commit holds no NOTIFY lock.
 */
export const channelFor = (origin: string): string | null => (origin ? null : EVENTS_CHANNEL);

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
  /** Gap-free per run. */
  seq: number;
  /** Gap-free per session; absent on events written before sessions counted them. */
  sessionSeq?: number;
  ts: number;
  type: string;
  payload: Record<string, unknown>;
}

export interface EventRow {
  id: string;
  event_id: string;
  run_id: string;
  session_id: string;
  seq: number;
  session_seq: string | null;
  /** A bigint column reads as a string; an event built from what was sent has its number. */
  ts: string | number;
  type: string;
  payload: Record<string, unknown> | null;
}

const toEvent = (r: EventRow): StoredEvent => ({
  id: String(r.id),
  eventId: r.event_id,
  runId: r.run_id,
  sessionId: r.session_id,
  seq: r.seq,
  ...(r.session_seq != null && { sessionSeq: Number(r.session_seq) }),
  ts: Number(r.ts),
  type: r.type,
  payload: r.payload ?? {},
});

const COLUMNS = 'id, event_id, run_id, session_id, seq, session_seq, ts, type, payload';

/** Where a statement runs: the caller's transaction, or straight on a pool (autocommit). */
export type Db = EntityManager | Queryable;

async function query<R>(db: Db, sql: string, params: unknown[]): Promise<R[]> {
  if ('execute' in db) return db.execute<R[]>(sql, params);
  return (await db.query<R>({ ...prepared(sql), values: params })).rows;
}

/** One run's events, as a part of a shared append. */
export interface RunEvents {
  runId: string;
  events: NewEvent[];
  /** Drop the events if the run has ended. */
  onlyIfActive: boolean;
}

/**
 * The one append: for each run, bump its seq and its session's head (taking
 * their row locks, so a session's events commit in cursor order and a
 * session-wide watcher can never skip one), insert, and notify
 * `session run last-id session-head run-seq origin` for each run. The
 * statement lives in the PL/pgSQL function `abc_append_events` (migration
 * `append_function`), so each connection plans it once, inside a transaction
 * too, where the ORM can only send statements planned on every call.
 */
const APPEND_MANY = 'SELECT id, event_id, session_id, seq, session_seq FROM abc_append_events(?::jsonb, ?::jsonb, ?, ?)';

/**
 * Appends the events of several runs in one statement: inside the caller's
 * transaction `db`, or atomically on its own (a pool). A run may appear once.
 * With an `origin` (an event bus's), it notifies no one: the caller publishes
 * the events after the commit (channelFor). Returns the committed events by run; a run
 * missing from the answer had ended (with `onlyIfActive`) or does not exist.
 */
export async function appendMany(db: Db, parts: RunEvents[], origin = ''): Promise<Map<string, StoredEvent[]>> {
  const { input, wanted } = appendArgs(parts);
  const json = JSON.stringify(input);
  const started = performance.now();
  const rows = await query<Pick<EventRow, 'id' | 'event_id' | 'session_id' | 'seq' | 'session_seq'>>(db, APPEND_MANY, [json, JSON.stringify(wanted), channelFor(origin), origin]);
  metrics.eventAppend.observe((performance.now() - started) / 1000);
  metrics.eventBatch.observe(input.length);
  // The append answers only what it assigned; the rest is what was sent, its payloads as JSON gives them
  // back (a payload read from the log later holds the same values, its keys in jsonb's order).
  const sent = new Map((JSON.parse(json) as typeof input).map((e) => [e.event_id, e]));
  return byRun(rows.map((r) => committedEvent(sent.get(r.event_id)!, r)));
}

/** An event as an append's input holds it (appendArgs). */
export type SentEvent = ReturnType<typeof appendArgs>['input'][number];

/** A committed event: what was sent, with what the database assigned it (its id, session and numbers). */
export const committedEvent = (e: SentEvent, assigned: Pick<EventRow, 'id' | 'session_id' | 'seq' | 'session_seq'>): StoredEvent =>
  toEvent({ ...assigned, event_id: e.event_id, run_id: e.run_id, ts: e.ts, type: e.type, payload: e.payload });

/** What abc_append_run_events assigned each event of one run, in the order sent, with the stored payload where the database completed it. */
export type Numbered = [id: number, seq: number, sessionSeq: number, payload?: Record<string, unknown>];

/** The events of one run's append (abc_append_run_events): `sent`, as JSON gives it back, numbered as the database answered. */
export const numberedEvents = (sent: SentEvent[], sessionId: string, numbered: Numbered[]): StoredEvent[] =>
  numbered.map(([id, seq, sessionSeq, stored], k) =>
    committedEvent({ ...sent[k]!, ...(stored && { payload: stored }) }, { id: String(id), session_id: sessionId, seq, session_seq: String(sessionSeq) }),
  );

/** abc_append_events' input and wanted runs for `parts`, for a statement that appends with other writes. */
export function appendArgs(parts: RunEvents[]) {
  const now = Date.now();
  const input = parts.flatMap((part) =>
    part.events.map((e, i) => ({ event_id: e.eventId ?? newId('evt'), run_id: part.runId, i: i + 1, ts: e.ts ?? now, type: e.type, payload: e.payload ?? {} })),
  );
  const wanted = parts.map((part) => ({ run_id: part.runId, n: part.events.length, active: part.onlyIfActive }));
  return { input, wanted };
}

/** One run's append (migration numbered_call_events): the run's session and what it assigned each event. */
const APPEND_RUN = "SELECT abc_append_run_events(?, ?::jsonb, ?, '', null) AS r";

/**
 * Appends events to one run, notifying as `appendMany` does. With
 * `onlyIfActive`, events of a run that has ended are dropped (late deltas);
 * without it, an unknown run is an error. A run's append alone goes through
 * abc_append_run_events, which answers only what it assigned.
 */
export async function appendEvents(db: Db, runId: string, events: NewEvent[], opts: { onlyIfActive?: boolean } = {}): Promise<StoredEvent[]> {
  if (events.length === 0) return [];
  if (opts.onlyIfActive) return (await appendMany(db, [{ runId, events, onlyIfActive: true }])).get(runId) ?? [];
  const { input } = appendArgs([{ runId, events, onlyIfActive: false }]);
  const json = JSON.stringify(input);
  const started = performance.now();
  let rows: { r: { session_id: string; numbered: Numbered[] } }[];
  try {
    rows = await query(db, APPEND_RUN, [runId, json, EVENTS_CHANNEL]);
  } catch (error) {
    if ((error as { code?: string }).code === 'ABC04') throw new Error(`cannot append events: run ${runId} does not exist`);
    throw error;
  }
  metrics.eventAppend.observe((performance.now() - started) / 1000);
  metrics.eventBatch.observe(input.length);
  return numberedEvents(JSON.parse(json) as SentEvent[], rows[0]!.r.session_id, rows[0]!.r.numbered);
}

/** Committed events by their ids, by run. */
export async function readByIds(db: Db, eventIds: string[]): Promise<Map<string, StoredEvent[]>> {
  const sql = `SELECT ${COLUMNS} FROM events WHERE ${inJsonList('event_id')}`;
  return byRun((await query<EventRow>(db, sql, [JSON.stringify(eventIds)])).map(toEvent));
}

function byRun(events: StoredEvent[]): Map<string, StoredEvent[]> {
  const byRun = new Map<string, StoredEvent[]>();
  for (const event of events.sort((a, b) => a.seq - b.seq)) {
    const list = byRun.get(event.runId);
    if (list) list.push(event);
    else byRun.set(event.runId, [event]);
  }
  return byRun;
}

export interface EventFilter {
  runId?: string;
  sessionId?: string;
  types?: string[];
  /** Types to leave out, e.g. `execution_state`. */
  excludeTypes?: string[];
  afterTs?: number;
}

/**
 * The filter and cursor as SQL, with the order of the cursor. A run's cursors
 * follow its seqs (its events are appended under its row lock, their ids drawn
 * in seq order), so its events after a cursor are those past a seq, which the
 * `(run_id, seq)` index reads without passing over other runs' events. That
 * seq is the cursor's own when the cursor is the run's, or else one before the
 * run's first event after it.
 */
function whereOf(filter: EventFilter, after: string): { where: string; params: unknown[]; order: string } {
  const where: string[] = [];
  const params: unknown[] = [];
  const cursor = after || '0';
  if (filter.runId) {
    where.push(`run_id = ? AND seq > coalesce((SELECT seq FROM events WHERE id = ? AND run_id = ?),
      (SELECT seq - 1 FROM events WHERE run_id = ? AND id > ? ORDER BY seq LIMIT 1))`);
    params.push(filter.runId, cursor, filter.runId, filter.runId, cursor);
  } else where.push('id > ?'), params.push(cursor);
  if (filter.sessionId) where.push('session_id = ?'), params.push(filter.sessionId);
  if (filter.types?.length) where.push('type IN (SELECT jsonb_array_elements_text(?::jsonb))'), params.push(JSON.stringify(filter.types));
  if (filter.excludeTypes?.length) where.push('type NOT IN (SELECT jsonb_array_elements_text(?::jsonb))'), params.push(JSON.stringify(filter.excludeTypes));
  if (filter.afterTs) where.push('ts > ?'), params.push(filter.afterTs);
  return { where: where.join(' AND '), params, order: filter.runId ? 'seq' : 'id' };
}

/** Whether `event` passes `filter`, as `readEvents` would judge it. */
export function matches(filter: EventFilter, event: StoredEvent): boolean {
  if (filter.runId && event.runId !== filter.runId) return false;
  if (filter.sessionId && event.sessionId !== filter.sessionId) return false;
  if (filter.types?.length && !filter.types.includes(event.type)) return false;
  if (filter.excludeTypes?.includes(event.type)) return false;
  return !filter.afterTs || event.ts > filter.afterTs;
}

/** Events matching `filter` with a cursor greater than `after`, in cursor order. */
export async function readEvents(db: Db, filter: EventFilter, after: string, limit: number): Promise<StoredEvent[]> {
  const { where, params, order } = whereOf(filter, after);
  const sql = `SELECT ${COLUMNS} FROM events WHERE ${where} ORDER BY ${order} LIMIT ?`;
  return (await query<EventRow>(db, sql, [...params, limit])).map(toEvent);
}

/**
 * `readEvents` for a watcher of one run (or else one session), with that run's
 * seq (or the session's head) as of the same snapshot: every event up to it is
 * committed, so a batch that starts right after it follows with no gap.
 */
export async function readWatched(db: Db, filter: EventFilter, after: string, limit: number): Promise<{ events: StoredEvent[]; head: number | undefined }> {
  const { where, params, order } = whereOf(filter, after);
  const head = filter.runId ? ['last_seq', 'runs', 'run_id', filter.runId] : ['event_head', 'sessions', 'session_id', filter.sessionId];
  const sql = `SELECT h.head, e.* FROM (SELECT ${head[0]} AS head FROM ${head[1]} WHERE ${head[2]} = ?) h
    LEFT JOIN LATERAL (SELECT ${COLUMNS} FROM events WHERE ${where} ORDER BY ${order} LIMIT ?) e ON true`;
  const rows = await query<EventRow & { head: string }>(db, sql, [head[3], ...params, limit]);
  return { events: rows.filter((r) => r.id != null).map(toEvent), head: rows[0] ? Number(rows[0].head) : undefined };
}

/** Whether an event with this id was committed. */
export async function eventExists(db: Db, eventId: string): Promise<boolean> {
  const sql = 'SELECT 1 FROM events WHERE event_id = ?';
  return (await query(db, sql, [eventId])).length > 0;
}
