// Reads the log from a cursor, then waits for wake-ups and reads again.
// Yields every matching event exactly once, in cursor order.
//
// A batch committed by this process is delivered from memory, without a read,
// when it starts right after the position the watcher has reached (the run's
// seq, or the session's head): those counters are gap-free and bumped under the
// row lock that orders the run's or session's commits, so no event can sit
// between. So are the events a watch starts with when its caller has just
// committed them. Anything else (a gap, a batch of another core) is read from
// the log.
import { metrics } from '../runtime/metrics.js';
import type { EventBus } from './event-bus.js';
import { isDatabaseUnavailable } from '../domain/errors.js';
import { matches, readWatched, type Db, type EventFilter, type StoredEvent } from './event-log.js';
import { untraced } from '../runtime/tracing.js';

export interface WatchOptions {
  filter: EventFilter;
  /** Start after this cursor ('' or '0' from the beginning). */
  cursor: string;
  /**
   * Events this process has just committed, when they are the first of the
   * run or session after `cursor` (all of them, in order): the watch starts
   * with them instead of reading the log.
   */
  known?: StoredEvent[];
  signal: AbortSignal;
  batch?: number;
  /** Checked before each catch-up read; once true and caught up, the watch ends. */
  finished?: () => Promise<boolean>;
}

/** How long a watcher waits before reading again while the database is away. */
const UNAVAILABLE_RETRY_MS = 1000;
/**
 * How often an idle watch that ends with its run asks whether the run has
 * ended: a run's end is announced after its commit, and a process that dies
 * between the two never announces it.
 */
const RUN_END_RECHECK_MS = 1000;
/** Local batches held for a consumer that lags; past this many events it reads the log instead. */
const MAX_HELD_EVENTS = 2000;

export async function* watchEvents(db: () => Db, bus: EventBus, opts: WatchOptions): AsyncGenerator<StoredEvent> {
  const byRun = Boolean(opts.filter.runId);
  const key = byRun ? `run:${opts.filter.runId}` : `session:${opts.filter.sessionId}`;
  const positionOf = (event: StoredEvent) => (byRun ? event.seq : event.sessionSeq);
  const limit = opts.batch ?? 500;
  let cursor = opts.cursor || '0';
  /** Every event of the run or session up to this position has been yielded or passed over; unknown during a read. */
  let reached: number | undefined;
  let dirty = true;
  let held: StoredEvent[][] = [];
  let heldEvents = 0;
  let wake: (() => void) | undefined;
  /** The position a held batch reaches: a notification up to it needs no read. */
  const heldUpTo = () => {
    const events = held.at(-1);
    return (events && positionOf(events.at(-1)!)) ?? -1;
  };
  const offWake = bus.onWake(key, (position) => {
    if (position !== undefined && position <= Math.max(reached ?? -1, heldUpTo())) return;
    dirty = true;
    wake?.();
  });
  // A watch that ends with its run reads once more when the run ends: its last
  // events may have come from memory, with no notification to read on.
  const endsWithRun = byRun ? opts.finished : undefined;
  const offEnded = endsWithRun && bus.onWake(`run-ended:${opts.filter.runId}`, () => ((dirty = true), wake?.()));
  /** Waits for a wake-up; a watch that ends with its run, at most RUN_END_RECHECK_MS. True when the time ran out. */
  const idle = () =>
    new Promise<boolean>((resolve) => {
      const timer = endsWithRun && setTimeout(() => resolve(true), RUN_END_RECHECK_MS).unref();
      wake = () => (timer && clearTimeout(timer), resolve(false));
    });
  /** Whether the run has ended, for a watch that timed out waiting; false while the database is away. */
  const endedUnannounced = async () => {
    try {
      return await untraced(async () => endsWithRun!());
    } catch (error) {
      if (isDatabaseUnavailable(error)) return false;
      throw error;
    }
  };
  const offBatch = bus.onBatch(key, (events) => {
    if (heldEvents + events.length > MAX_HELD_EVENTS) dirty = true;
    else (held.push(events), (heldEvents += events.length));
    wake?.();
  });
  const first = opts.known?.[0] && positionOf(opts.known[0]);
  if (first !== undefined) {
    // Everything before the first known event lies at or before the cursor.
    reached = first - 1;
    held = [opts.known!];
    heldEvents = opts.known!.length;
    dirty = false;
  }
  const onAbort = () => wake?.();
  opts.signal.addEventListener('abort', onAbort);
  metrics.liveSubscribers.inc();
  try {
    while (!opts.signal.aborted) {
      if (!dirty && held.length) {
        const events = held.shift()!;
        heldEvents -= events.length;
        const first = positionOf(events[0]!);
        const last = positionOf(events.at(-1)!);
        if (first === undefined || last === undefined || reached === undefined) dirty = true;
        else if (last <= reached) continue;
        else if (first !== reached + 1) dirty = true;
        else {
          reached = last;
          for (const event of events) {
            cursor = event.id;
            if (!matches(opts.filter, event)) continue;
            yield event;
            if (opts.signal.aborted) return;
          }
        }
        continue;
      }
      if (!dirty) {
        const timedOut = await idle();
        wake = undefined;
        if (timedOut && !dirty && (await endedUnannounced())) dirty = true;
        continue;
      }
      dirty = false;
      // Batches committed before this read are in it; later ones are judged against what it reaches.
      held = [];
      heldEvents = 0;
      reached = undefined;
      let last = false;
      try {
        // Read `finished` first: whatever committed before it turned true is read below.
        // A watch's reads are delivery, not work of the call that watches: no spans.
        last = (await untraced(async () => opts.finished?.())) ?? false;
        for (;;) {
          const page = await untraced(() => readWatched(db(), opts.filter, cursor, limit));
          for (const event of page.events) {
            cursor = event.id;
            yield event;
            if (opts.signal.aborted) return;
          }
          if (page.events.length < limit) {
            reached = page.head;
            break;
          }
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
    offWake();
    offEnded?.();
    offBatch();
    opts.signal.removeEventListener('abort', onAbort);
  }
}
