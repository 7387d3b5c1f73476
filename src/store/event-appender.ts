// Group commit across runs: while one append is in flight, the batches of every
// run queue up and go out together in the next statement. One run alone costs
// no added latency; a hundred streaming runs cost one commit per round, not one
// each. Each committed batch goes straight to this process's watchers.
import type { EventBus } from './event-bus.js';
import { appendMany, eventExists, readByIds, type NewEvent, type RunEvents, type StoredEvent } from './event-log.js';
import type { Queryable } from './native.js';
import { retryOnConflict, retryWhileUnavailable } from './outage.js';

/** The most events one shared statement carries; the rest wait for the next. */
const MAX_EVENTS = 2000;

interface Waiting extends RunEvents {
  resolve(events: StoredEvent[]): void;
  reject(error: unknown): void;
}

export class EventAppender {
  readonly #pool: Queryable;
  readonly #bus: EventBus | undefined;
  #waiting: Waiting[] = [];
  #running = false;

  constructor(pool: Queryable, bus?: EventBus) {
    this.#pool = pool;
    this.#bus = bus;
  }

  /**
   * Appends `events` (each with its `eventId` set) to `runId` in the next shared
   * commit. Resolves with the committed events: none when `onlyIfActive` and the
   * run had ended. While the database is away it retries.
   */
  append(runId: string, events: NewEvent[], onlyIfActive: boolean): Promise<StoredEvent[]> {
    if (events.length === 0) return Promise.resolve([]);
    return new Promise((resolve, reject) => {
      this.#waiting.push({ runId, events, onlyIfActive, resolve, reject });
      if (!this.#running) {
        this.#running = true;
        queueMicrotask(() => void this.#run());
      }
    });
  }

  async #run(): Promise<void> {
    while (this.#waiting.length) {
      const group = this.#take();
      await this.#commit(group);
    }
    this.#running = false;
  }

  /** The next group: in arrival order, one part per run (a run's next part waits its turn), at most MAX_EVENTS. */
  #take(): Waiting[] {
    const group: Waiting[] = [];
    const later: Waiting[] = [];
    const runs = new Set<string>();
    let events = 0;
    for (const part of this.#waiting) {
      if (runs.has(part.runId) || (group.length > 0 && events + part.events.length > MAX_EVENTS)) later.push(part);
      else {
        group.push(part);
        runs.add(part.runId);
        events += part.events.length;
      }
    }
    this.#waiting = later;
    return group;
  }

  async #commit(group: Waiting[]): Promise<void> {
    try {
      const committed = await this.#write(group);
      for (const part of group) {
        const events = committed.get(part.runId) ?? [];
        this.#bus?.publish(events);
        part.resolve(events);
      }
    } catch (error) {
      // One part the database refuses must not fail the others: each goes alone.
      if (group.length === 1) return group[0]!.reject(error);
      for (const part of group) await this.#commit([part]);
    }
  }

  /** One statement; after a lost answer, a retry first checks whether it committed after all. */
  #write(group: Waiting[]): Promise<Map<string, StoredEvent[]>> {
    const probe = group[0]!.events[0]!.eventId!;
    return retryWhileUnavailable(async (attempt) => {
      // Committed, but its answer was lost: what committed is read back, to be delivered as an answer would be.
      if (attempt > 0 && (await eventExists(this.#pool, probe))) return readByIds(this.#pool, group.flatMap((part) => part.events.map((e) => e.eventId!)));
      return retryOnConflict(() => appendMany(this.#pool, group, this.#bus?.origin));
    });
  }
}
