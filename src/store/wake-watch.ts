// Waiting for something to change: subscribe first, then read, so a change that
// commits between the read and the wait is never missed.
import type { EventBus } from './event-bus.js';

export class WakeWatch {
  #changed = false;
  #wake: (() => void) | undefined;
  readonly #off: () => void;

  /** `key` as for EventBus.onWake: `run:ID`, `session:ID` or `ticket:ID`. */
  constructor(bus: EventBus, key: string) {
    this.#off = bus.onWake(key, () => {
      this.#changed = true;
      this.#wake?.();
    });
  }

  /** Resolves at the first change since the last call (at once if one already came), at `deadline`, or when `signal` aborts. */
  async next(deadline: number, signal?: AbortSignal): Promise<void> {
    if (!this.#changed && !signal?.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, Math.max(0, deadline - Date.now()));
        signal?.addEventListener('abort', done);
        this.#wake = done;
      });
      this.#wake = undefined;
    }
    this.#changed = false;
  }

  close(): void {
    this.#off();
  }
}

/**
 * Reads until `done(value)`, `deadline` or `signal`, woken by `key`'s
 * notifications, and at least every `recheckMs` when given (for a change that
 * may come without its notification). The watch is on before the first read,
 * so no change is missed. `deadline` is computed from the first value when it
 * is a function.
 */
export async function waitUntil<T>(
  bus: EventBus,
  key: string,
  read: () => Promise<T>,
  done: (value: T) => boolean,
  deadline: number | ((first: T) => number),
  signal?: AbortSignal,
  recheckMs = Infinity,
): Promise<T> {
  const watch = new WakeWatch(bus, key);
  try {
    let value = await read();
    const until = typeof deadline === 'function' ? deadline(value) : deadline;
    while (!done(value) && Date.now() < until && !signal?.aborted) {
      await watch.next(Math.min(until, Date.now() + recheckMs), signal);
      value = await read();
    }
    return value;
  } finally {
    watch.close();
  }
}
