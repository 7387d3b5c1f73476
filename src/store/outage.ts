// Riding out what the database does to a transaction without it being wrong:
// an outage (retried with backoff for a bounded time), and a deadlock or
// serialization failure (PostgreSQL aborts one side; it simply runs again).
import { backoffDelay, type RetryPolicy } from '../domain/backoff.js';
import { isDatabaseUnavailable, isTransactionConflict } from '../domain/errors.js';

/** Seed 001 §10.2's formula, capped low so a returning database is used within seconds (writes and the listener). */
export const OUTAGE_RETRY: RetryPolicy = { maxRetries: Infinity, initialDelayMs: 100, maxDelayMs: 2000, multiplier: 2, jitter: 0.2 };
/** How long a write waits for the database before it gives up. */
export const OUTAGE_LIMIT_MS = 60_000;

/**
 * Runs `fn`, and again while it fails because the database is unreachable, for
 * at most `limitMs`. `fn` learns the attempt number, so a retry can first check
 * whether an attempt whose answer was lost committed after all.
 */
export async function retryWhileUnavailable<T>(fn: (attempt: number) => Promise<T>, limitMs = OUTAGE_LIMIT_MS): Promise<T> {
  const since = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (error) {
      if (!isDatabaseUnavailable(error) || Date.now() - since > limitMs) throw error;
      await new Promise((resolve) => setTimeout(resolve, backoffDelay(OUTAGE_RETRY, attempt, Math.random())));
    }
  }
}

/** Runs the transaction `fn` again (up to `attempts` times) when PostgreSQL aborted it as a deadlock victim or a serialization failure. */
export async function retryOnConflict<T>(fn: () => Promise<T>, attempts = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      if (!isTransactionConflict(error) || attempt >= attempts) throw error;
      await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 20 * attempt));
    }
  }
}
