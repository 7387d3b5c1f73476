// A run's stream events in order: while one of its batches is being committed,
// new events queue up and go out together in its next one. The appender shares
// each commit among every run streaming in this process.
import { newId } from '../runtime/new-id.js';
import type { EventAppender } from '../store/event-appender.js';
import type { NewEvent } from '../store/event-log.js';

export class EventWriter {
  readonly #appender: EventAppender;
  readonly #runId: string;
  readonly #onlyIfActive: boolean;
  #pending: NewEvent[] = [];
  #flushing: Promise<void> | undefined;
  #failure: unknown;

  /** With `onlyIfActive` (the default), events arriving after the run ended are dropped. */
  constructor(appender: EventAppender, runId: string, opts: { onlyIfActive?: boolean } = {}) {
    this.#appender = appender;
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
    // Events pushed in this same turn go out in the first batch.
    await Promise.resolve();
    try {
      while (this.#pending.length) {
        const batch = this.#pending;
        this.#pending = [];
        await this.#appender.append(this.#runId, batch, this.#onlyIfActive);
      }
    } catch (error) {
      this.#failure = error;
    } finally {
      this.#flushing = undefined;
    }
  }
}
