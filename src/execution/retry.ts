// One retry helper for every caller: §10.2 backoff, abortable sleeps.
import { backoffDelay, type RetryPolicy } from '../domain/backoff.js';

/** Sleeps `ms`, rejecting early with the signal's reason when aborted. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Runs `attempt` until it succeeds, `shouldRetry` says no, or retries run out.
 * `onRetry` sees each failure that will be retried.
 */
export async function withRetry<T>(
  policy: RetryPolicy,
  attempt: (n: number) => Promise<T>,
  shouldRetry: (error: unknown) => boolean,
  opts: { signal?: AbortSignal; onRetry?: (error: unknown, n: number, delayMs: number) => void } = {},
): Promise<T> {
  for (let n = 0; ; n++) {
    try {
      return await attempt(n);
    } catch (error) {
      if (n >= policy.maxRetries || !shouldRetry(error) || opts.signal?.aborted) throw error;
      const delay = backoffDelay(policy, n, Math.random());
      opts.onRetry?.(error, n, delay);
      await sleep(delay, opts.signal);
    }
  }
}
