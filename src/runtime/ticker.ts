// A periodic job that never overlaps itself, and whose stop() waits for the run in flight.
import type { Logger } from './log.js';

export interface Ticker {
  stop(): Promise<void>;
}

export function every(ms: number, job: () => Promise<unknown>, log: Logger, what: string): Ticker {
  let running: Promise<unknown> = Promise.resolve();
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    running = job()
      .catch((error) => log.error({ err: error }, `${what} failed`))
      .finally(() => (busy = false));
  }, ms);
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}

/**
 * Runs `batch` (which deletes up to `size` rows and says how many went) until
 * one comes back short, at most `most` times: a backlog drains in many short
 * transactions instead of one long one, and a sweep still ends.
 */
export async function inBatches(batch: (size: number) => Promise<number>, size: number, most = 20): Promise<number> {
  let total = 0;
  for (let i = 0; i < most; i++) {
    const n = await batch(size);
    total += n;
    if (n < size) break;
  }
  return total;
}
