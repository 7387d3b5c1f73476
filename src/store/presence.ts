// Which sessions have a connected client, across every core: rows this core
// refreshes while its connections live, and that go stale when it dies; a
// sweep on any core deletes stale rows. Connections that come and go while a
// write is in flight are written together in the next one.
import { fulfilled, GroupCommit, oneByOne, type Outcome } from '../runtime/group-commit.js';
import { poolOf, prepared, refusedByServer } from './native.js';
import type { Orm } from './orm.js';

type Join = { connectionId: string; sessionId: string; userId: string };
/** A connection that began to watch a session, one that closed, or a refresh of every live one. */
type Change = { join: Join } | { leave: string } | { refresh: true };

// One statement for a group: the closed connections' rows go, the new ones come (or are refreshed).
// A refresh writes every live row again, so one that a sweep deleted while this core could not reach the database comes back.
const WRITE = prepared(
  `WITH gone AS (DELETE FROM client_connections WHERE connection_id = ANY($1::text[]))
   INSERT INTO client_connections (connection_id, session_id, user_id, core_id)
   SELECT c, s, u, $5 FROM unnest($2::text[], $3::text[], $4::text[]) AS j(c, s, u)
   ON CONFLICT (connection_id, session_id) DO UPDATE SET seen_at = now()`,
);

// Rows not refreshed within the TTL already count as offline. A row another transaction holds (a refresh) is left to it;
// the rows this one locked keep their ctids until it ends, so they are deleted by them, not by a join with the table.
const DELETE_STALE = prepared(
  `WITH gone AS (
     DELETE FROM client_connections WHERE ctid = ANY (ARRAY(
       SELECT ctid FROM client_connections WHERE seen_at < now() - ($1 * interval '1 millisecond') LIMIT $2 FOR UPDATE SKIP LOCKED))
     RETURNING 1)
   SELECT count(*)::int AS n FROM gone`,
);

export class Presence {
  readonly #orm: Orm;
  readonly #coreId: string;
  readonly #ttlMs: number;
  /** connection id -> its user and the sessions it watches, on this core. */
  readonly #local = new Map<string, { userId: string; sessions: Set<string> }>();
  /** Writes in flight, so close() can wait for them before the pool ends. */
  readonly #writes = new Set<Promise<unknown>>();
  readonly #group = new GroupCommit<Change, void>((changes) => this.#commitGroup(changes));
  #closed = false;

  constructor(orm: Orm, coreId: string, ttlMs: number) {
    this.#orm = orm;
    this.#coreId = coreId;
    this.#ttlMs = ttlMs;
  }

  /** Should run every third of the TTL: keeps this core's connections fresh, by their keys. */
  async refresh(): Promise<void> {
    if (this.#local.size === 0) return;
    await this.#write({ refresh: true });
  }

  /**
   * A join the database refused is forgotten, so that no refresh carries it
   * again; one that could not reach the database stays, and the next refresh
   * writes it.
   */
  async join(connectionId: string, sessionId: string, userId: string): Promise<void> {
    const local = this.#local.get(connectionId) ?? { userId, sessions: new Set<string>() };
    const added = !local.sessions.has(sessionId);
    local.sessions.add(sessionId);
    this.#local.set(connectionId, local);
    try {
      await this.#write({ join: { connectionId, sessionId, userId } });
    } catch (error) {
      if (!refusedByServer(error)) throw error;
      if (added) local.sessions.delete(sessionId);
      if (local.sessions.size === 0 && this.#local.get(connectionId) === local) this.#local.delete(connectionId);
      throw error;
    }
  }

  async leave(connectionId: string): Promise<void> {
    if (!this.#local.delete(connectionId)) return;
    await this.#write({ leave: connectionId });
  }

  /**
   * Stops writing and waits for the writes in flight. Connections that close
   * while the core shuts down would otherwise reach for the pool as it ends
   * (and an acquire racing the end is never released); their rows go stale
   * with the TTL instead.
   */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled([...this.#writes]);
  }

  async #write(change: Change): Promise<void> {
    if (this.#closed) return;
    const write = this.#group.add(change);
    this.#writes.add(write);
    try {
      await write;
    } finally {
      this.#writes.delete(write);
    }
  }

  /** A group in one statement; one the database refuses, each change alone, so that one bad change fails no other. */
  async #commitGroup(changes: Change[]): Promise<Outcome<void>[]> {
    try {
      await this.#commit(changes);
      return fulfilled(changes.map(() => undefined));
    } catch (error) {
      if (changes.length === 1 || !refusedByServer(error)) throw error;
      return oneByOne(changes, (change) => this.#commit([change]));
    }
  }

  /**
   * Changes in one statement, on the pool itself: never inside a caller's
   * transaction. A closed connection is final: its joins are dropped. A
   * refresh takes the live connections as they are when its group is written,
   * after every earlier group, so it cannot bring back one that closed.
   */
  async #commit(changes: Change[]): Promise<void> {
    const gone = new Set(changes.flatMap((c) => ('leave' in c ? [c.leave] : [])));
    const live = changes.some((c) => 'refresh' in c) ? [...this.#local].flatMap(([connectionId, { userId, sessions }]) => [...sessions].map((sessionId) => ({ connectionId, sessionId, userId }))) : [];
    const asked = [...changes.flatMap((c) => ('join' in c ? [c.join] : [])), ...live];
    // A row once: one INSERT may not touch a row twice.
    const joins = [...new Map(asked.filter((j) => !gone.has(j.connectionId)).map((j) => [`${j.connectionId} ${j.sessionId}`, j] as const)).values()];
    await poolOf(this.#orm).query({
      ...WRITE,
      values: [[...gone], joins.map((j) => j.connectionId), joins.map((j) => j.sessionId), joins.map((j) => j.userId), this.#coreId],
    });
  }

  /** Deletes up to `limit` rows that no core refreshed within the TTL (their core died), and says how many went. */
  async deleteStale(limit: number): Promise<number> {
    const { rows } = await poolOf(this.#orm).query<{ n: number }>({
      ...DELETE_STALE,
      values: [this.#ttlMs, limit],
    });
    return rows[0]!.n;
  }

  /** Whether any core has a live client of the session. */
  async online(sessionId: string): Promise<boolean> {
    const [row] = await this.#orm.em
      .fork()
      .execute<{ online: boolean }[]>(
        "SELECT EXISTS (SELECT 1 FROM client_connections WHERE session_id = ? AND seen_at > now() - (? * interval '1 millisecond')) AS online",
        [sessionId, this.#ttlMs],
      );
    return row!.online;
  }
}
