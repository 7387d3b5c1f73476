// Backpressure from a client to the core. A stream whose client has not taken
// MAX_UNSENT_BYTES of what was written to it stops taking messages from the
// core until the client's socket drains; gRPC's flow control then holds the
// core's watcher, which reads the log again when it is asked for more.
import { pausedStreams } from './metrics.js';

/** What may wait in the gateway for one client before its stream is held. */
export const MAX_UNSENT_BYTES = 1024 * 1024;

export interface Hold {
  /** After a write: holds the source while the client is behind. */
  check(): void;
  /** The client left: lets the source go for good, so that the rest of it is dropped and its call can end. */
  end(): void;
}

export function holdWhileBehind(
  source: { pause(): unknown; resume(): unknown },
  sink: { once(event: 'drain', listener: () => void): unknown; off(event: 'drain', listener: () => void): unknown },
  unsent: () => number,
  surface: 'im' | 'sse' | 'llm',
): Hold {
  let held = false;
  let ended = false;
  const release = () => {
    if (!held) return;
    held = false;
    sink.off('drain', release);
    pausedStreams.dec({ surface });
    source.resume();
  };
  return {
    check: () => {
      if (held || ended || unsent() < MAX_UNSENT_BYTES) return;
      held = true;
      pausedStreams.inc({ surface });
      source.pause();
      sink.once('drain', release);
    },
    end: () => {
      ended = true;
      release();
    },
  };
}
