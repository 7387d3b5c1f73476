// Waiting for a ticket to change: subscribe first, then read, so a change that
// commits between the read and the wait is never missed.
import type { EventBus } from '../store/event-bus.js';

export class TicketWatch {
  #changed = false;
  #wake: (() => void) | undefined;
  readonly #off: () => void;

  constructor(bus: EventBus, ticket: string) {
    this.#off = bus.onWake(`ticket:${ticket}`, () => {
      this.#changed = true;
      this.#wake?.();
    });
  }

  /** Resolves at the first change since the last call (at once if one already came), or at `deadline`. */
  async next(deadline: number): Promise<void> {
    if (!this.#changed) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
    this.#changed = false;
  }

  close(): void {
    this.#off();
  }
}
