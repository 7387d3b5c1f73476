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
