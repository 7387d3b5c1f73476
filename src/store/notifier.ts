// Notifications sent after the commits they announce, many to one statement.
// PostgreSQL holds one lock from a notifying commit until its WAL flush ends,
// so commits that NOTIFY go one at a time and share no flush. A writer that
// commits first and announces here leaves its commit free to share a flush;
// the announcements go out together, on the listener's connection, in a
// transaction with nothing to make durable (synchronous_commit is off there).
//
// An announcement of the same key replaces one still waiting: a wake-up says
// "look again", and the latest position says it all. One that fails waits for
// the next connection. One lost with its process (a crash between the commit
// and the send) leaves other processes' watchers to the next wake-up of the
// same run or ticket: its recovery's, or a reconnect's "look again"; and a
// waiter for a ticket's end, or a watch that ends with its run, to its own
// recheck.
import { setTimeout as delay } from 'node:timers/promises';
import type pg from 'pg';
import type { Logger } from '../runtime/log.js';

/** Many notifications in one statement, planned once per connection. */
const SEND = { name: 'abc_announce', text: 'SELECT count(pg_notify(c, p)) FROM unnest($1::text[], $2::text[]) AS n(c, p)' };

/** The pause before announcements that failed go again. */
const RETRY_MS = 250;

export class Notifier {
  readonly #log: Logger;
  /** `channel key` -> [channel, payload], in the order first announced. */
  readonly #waiting = new Map<string, [string, string]>();
  #client: pg.Client | undefined;
  #sending: Promise<void> | undefined;

  constructor(log: Logger) {
    this.#log = log;
  }

  /** Sends `payload` on `channel` soon; replaces a waiting one of the same `key`. Never throws. */
  announce(channel: string, payload: string, key = payload): void {
    this.#waiting.set(`${channel} ${key}`, [channel, payload]);
    this.#kick();
  }

  /** The connection to send on, or none while the listener is away. */
  attach(client: pg.Client | undefined): void {
    this.#client = client;
    this.#kick();
  }

  /** Resolves when nothing waits, or after `ms`. */
  async drain(ms: number): Promise<void> {
    const until = Date.now() + ms;
    while (this.#waiting.size && Date.now() < until) await (this.#sending ?? new Promise((r) => setTimeout(r, 10)));
  }

  /** Sends soon: after this turn of the event loop, so that what its other callbacks announce goes in the same statement. */
  #kick(): void {
    const client = this.#client;
    if (this.#sending || !client || !this.#waiting.size) return;
    this.#sending = new Promise((resolve) => setImmediate(resolve)).then(() => this.#send(client)).finally(() => {
      this.#sending = undefined;
      this.#kick();
    });
  }

  /** Sends what waits, then what arrived meanwhile, until nothing waits or the connection changes or fails. */
  async #send(client: pg.Client): Promise<void> {
    while (this.#waiting.size && this.#client === client) {
      const batch = [...this.#waiting];
      this.#waiting.clear();
      try {
        await client.query({ ...SEND, values: [batch.map(([, [c]]) => c), batch.map(([, [, p]]) => p)] });
      } catch (error) {
        // Back in line, behind none of their own key: the next connection sends them.
        for (const [key, value] of batch) if (!this.#waiting.has(key)) this.#waiting.set(key, value);
        this.#log.debug({ err: error, waiting: this.#waiting.size }, 'announcements failed; they go again');
        // A lost connection is replaced (attach); on one that lives, they go again after a pause.
        await delay(RETRY_MS, undefined, { ref: false });
        return;
      }
    }
  }
}
