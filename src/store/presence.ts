// Which sessions have a connected client, across every core: rows this core
// refreshes while its connections live, and that go stale when it dies.
// Connections that come and go while a write is in flight are written
// together in the next one.
import { fulfilled, GroupCommit, oneByOne, type Outcome } from '../runtime/group-commit.js';
import { poolOf, prepared, refusedByServer } from './native.js';
import type { Orm } from './orm.js';

/** A connection that began to watch a session, or one that closed. */
type Change = { join: { connectionId: string; sessionId: string; userId: string } } | { leave: string };

// One statement for a group: the closed connections' rows go, the new ones come (or are refreshed).
const WRITE = prepared(
  `WITH gone AS (DELETE FROM client_connections WHERE connection_id = ANY($1::text[]))
   INSERT INTO client_connections (connection_id, session_id, user_id, core_id)
   SELECT c, s, u, $5 FROM unnest($2::text[], $3::text[], $4::text[]) AS j(c, s, u)
   ON CONFLICT (connection_id, session_id) DO UPDATE SET seen_at = now()`,
);

export class Presence {
  readonly #orm: Orm;
  readonly #coreId: string;
  readonly #ttlMs: number;
  /** connection id -> the sessions it watches, on this core. */
  readonly #local = new Map<string, Set<string>>();
  /** Writes in flight, so close() can wait for them before the pool ends. */
  readonly #writes = new Set<Promise<unknown>>();
  readonly #group = new GroupCommit<Change, void>((changes) => this.#commitGroup(changes));
  #closed = false;

  constructor(orm: Orm, coreId: string, ttlMs: number) {
    this.#orm = orm;
    this.#coreId = coreId;
    this.#ttlMs = ttlMs;
  }

  /** Should run every third of the TTL: keeps this core's connections fresh. */
  async refresh(): Promise<void> {
    if (this.#local.size === 0) return;
    await this.#orm.em.fork().execute('UPDATE client_connections SET seen_at = now() WHERE core_id = ?', [this.#coreId]);
  }

  async join(connectionId: string, sessionId: string, userId: string): Promise<void> {
    const sessions = this.#local.get(connectionId) ?? new Set();
    sessions.add(sessionId);
    this.#local.set(connectionId, sessions);
    await this.#write({ join: { connectionId, sessionId, userId } });
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

  /** Changes in one statement, on the pool itself: never inside a caller's transaction. A closed connection is final: its joins are dropped. */
  async #commit(changes: Change[]): Promise<void> {
    const gone = new Set(changes.flatMap((c) => ('leave' in c ? [c.leave] : [])));
    // A row once: one INSERT may not touch a row twice.
    const joins = [...new Map(changes.flatMap((c) => ('join' in c && !gone.has(c.join.connectionId) ? [[`${c.join.connectionId} ${c.join.sessionId}`, c.join] as const] : []))).values()];
    await poolOf(this.#orm).query({
      ...WRITE,
      values: [[...gone], joins.map((j) => j.connectionId), joins.map((j) => j.sessionId), joins.map((j) => j.userId), this.#coreId],
    });
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
