// A run's stream events in order: while one of its batches is being committed,
// new events queue up and go out together in its next one. The appender shares
// each commit among every run streaming in this process.
//
// Deltas that queue up together are stored as one: a quiet stream commits each
// delta as it comes, a fast one commits (and delivers) what arrived during the
// last commit as one delta, with the same text in the same order.
import { newId } from '../runtime/new-id.js';
import type { EventAppender } from '../store/event-appender.js';
import type { NewEvent } from '../store/event-log.js';

/** The most text one coalesced delta carries; a longer run of deltas makes several. */
export const MAX_COALESCED_TEXT = 16 * 1024;

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
    const last = this.#pending.at(-1);
    if (last && joinable(last, event)) last.payload = { text: `${last.payload!.text}${event.payload!.text}` };
    else this.#pending.push({ ts: Date.now(), eventId: newId('evt'), ...event });
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

/** Whether `next`, a delta, may be stored as the end of `last`, a delta still waiting. */
function joinable(last: NewEvent, next: NewEvent): boolean {
  if (last.type !== 'agent_stream_delta' || next.type !== 'agent_stream_delta') return false;
  const a = last.payload?.text;
  const b = next.payload?.text;
  return typeof a === 'string' && typeof b === 'string' && a.length + b.length <= MAX_COALESCED_TEXT && isTextOnly(last.payload!) && isTextOnly(next.payload!);
}

const isTextOnly = (payload: Record<string, unknown>) => Object.keys(payload).length === 1;
