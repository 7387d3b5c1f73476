// Group commit for a run's stream events: while one append is in flight, new
// events queue up and go out together in the next transaction. Low load costs
// no added latency; high load costs one commit per batch, not per delta.
import type { Orm } from '../store/orm.js';
import { newId } from '../runtime/new-id.js';
import { appendEvents, eventExists, type NewEvent } from '../store/event-log.js';
import { retryWhileUnavailable } from '../store/outage.js';

export class EventWriter {
  readonly #orm: Orm;
  readonly #runId: string;
  #pending: NewEvent[] = [];
  #flushing: Promise<void> | undefined;
  #failure: unknown;
  readonly #onlyIfActive: boolean;

  /** With `onlyIfActive` (the default), events arriving after the run ended are dropped. */
  constructor(orm: Orm, runId: string, opts: { onlyIfActive?: boolean } = {}) {
    this.#orm = orm;
    this.#runId = runId;
    this.#onlyIfActive = opts.onlyIfActive ?? true;
  }

  push(event: NewEvent): void {
    if (this.#failure) throw this.#failure;
    this.#pending.push({ ts: Date.now(), eventId: newId('evt'), ...event });
    this.#flushing ??= this.#drain();
  }

  /** Resolves once every pushed event is committed (or dropped because the run ended). */
  async flush(): Promise<void> {
    while (this.#flushing) await this.#flushing;
    if (this.#failure) throw this.#failure;
  }

  async #drain(): Promise<void> {
    await Promise.resolve();
    try {
      while (this.#pending.length) {
        const batch = this.#pending;
        this.#pending = [];
        await this.#append(batch);
      }
    } catch (error) {
      this.#failure = error;
    } finally {
      this.#flushing = undefined;
    }
  }

  /**
   * Appends one batch (one atomic statement). While the database is away it
   * retries; a retry first checks whether the lost attempt committed after all,
   * so a batch is written exactly once.
   */
  async #append(batch: NewEvent[]): Promise<void> {
    await retryWhileUnavailable(async (attempt) => {
      if (attempt > 0 && (await eventExists(this.#orm.em.fork(), batch[0]!.eventId!))) return;
      await appendEvents(this.#orm.em.fork(), this.#runId, batch, { onlyIfActive: this.#onlyIfActive });
    });
  }
}
