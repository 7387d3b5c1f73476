// Which sessions have a connected client, across every core: rows this core
// refreshes while its connections live, and that go stale when it dies.
import { poolOf, prepared } from './native.js';
import type { Orm } from './orm.js';

export class Presence {
  readonly #orm: Orm;
  readonly #coreId: string;
  readonly #ttlMs: number;
  /** connection id -> the sessions it watches, on this core. */
  readonly #local = new Map<string, Set<string>>();
  /** Writes in flight, so close() can wait for them before the pool ends. */
  readonly #writes = new Set<Promise<unknown>>();
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
    await this.#write(
      `INSERT INTO client_connections (connection_id, session_id, user_id, core_id) VALUES (?, ?, ?, ?)
       ON CONFLICT (connection_id, session_id) DO UPDATE SET seen_at = now()`,
      [connectionId, sessionId, userId, this.#coreId],
    );
  }

  async leave(connectionId: string): Promise<void> {
    if (!this.#local.delete(connectionId)) return;
    await this.#write('DELETE FROM client_connections WHERE connection_id = ?', [connectionId]);
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

  async #write(sql: string, params: unknown[]): Promise<void> {
    if (this.#closed) return;
    // On the pool itself, as a prepared statement: never inside a caller's transaction.
    const write = poolOf(this.#orm).query({ ...prepared(sql), values: params });
    this.#writes.add(write);
    try {
      await write;
    } finally {
      this.#writes.delete(write);
    }
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
