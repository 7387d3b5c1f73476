// Reads the log from a cursor, then waits for wake-ups and reads again.
// Yields every matching event exactly once, in cursor order.
import { metrics } from '../runtime/metrics.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { EventBus } from './event-bus.js';
import { isDatabaseUnavailable } from '../domain/errors.js';
import { readEvents, type EventFilter, type StoredEvent } from './event-log.js';
import { untraced } from '../runtime/tracing.js';

export interface WatchOptions {
  filter: EventFilter;
  /** Start after this cursor ('' or '0' from the beginning). */
  cursor: string;
  signal: AbortSignal;
  batch?: number;
  /** Checked before each catch-up read; once true and caught up, the watch ends. */
  finished?: () => Promise<boolean>;
}

/** How long a watcher waits before reading again while the database is away. */
const UNAVAILABLE_RETRY_MS = 1000;

export async function* watchEvents(em: () => EntityManager, bus: EventBus, opts: WatchOptions): AsyncGenerator<StoredEvent> {
  const key = opts.filter.runId ? `run:${opts.filter.runId}` : `session:${opts.filter.sessionId}`;
  let cursor = opts.cursor || '0';
  let dirty = true;
  let wake: (() => void) | undefined;
  const off = bus.onWake(key, () => {
    dirty = true;
    wake?.();
  });
  const onAbort = () => wake?.();
  opts.signal.addEventListener('abort', onAbort);
  metrics.liveSubscribers.inc();
  try {
    while (!opts.signal.aborted) {
      if (!dirty) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      dirty = false;
      let last = false;
      try {
        // Read `finished` first: whatever committed before it turned true is read below.
        // A watch's reads are delivery, not work of the call that watches: no spans.
        last = (await untraced(async () => opts.finished?.())) ?? false;
        for (;;) {
          const page = await untraced(() => readEvents(em(), opts.filter, cursor, opts.batch ?? 500));
          for (const event of page) {
            cursor = event.id;
            yield event;
            if (opts.signal.aborted) return;
          }
          if (page.length < (opts.batch ?? 500)) break;
        }
      } catch (error) {
        // The database is away: keep the cursor and read again once the bus
        // reconnects (it wakes everyone) or after a pause, whichever is first.
        if (!isDatabaseUnavailable(error)) throw error;
        const retry = setTimeout(() => {
          dirty = true;
          wake?.();
        }, UNAVAILABLE_RETRY_MS);
        retry.unref();
        continue;
      }
      if (last) return;
    }
  } finally {
    metrics.liveSubscribers.dec();
    off();
    opts.signal.removeEventListener('abort', onAbort);
  }
}
