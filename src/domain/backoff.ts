// Exponential backoff of seed 001 §10.2:
// delay = min(initial * multiplier^attempt, max) * (1 + random(-jitter, jitter))

export interface RetryPolicy {
  maxRetries: number;
  initialDelayMs: number;
  maxDelayMs: number;
  multiplier: number;
  jitter: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxRetries: 3, initialDelayMs: 1000, maxDelayMs: 30_000, multiplier: 2, jitter: 0.1 };

/** The delay before retry number `attempt` (0-based). `random` is in [0, 1). */
export function backoffDelay(policy: RetryPolicy, attempt: number, random: number): number {
  const base = Math.min(policy.initialDelayMs * policy.multiplier ** attempt, policy.maxDelayMs);
  return Math.round(base * (1 + (random * 2 - 1) * policy.jitter));
}
