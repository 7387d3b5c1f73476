// The read-only projection of a ticket that pollers see, in the contract's
// poll-response shape. Pure: derived values (percent, ttl, hints) are computed
// from the rows, nothing is written.
import { CONTRACT_LIFECYCLE_MACHINE, percentOf } from '../domain/contract-lifecycle.machine.js';
import type { StepRow, TicketRow } from '../store/ticket-store.js';

/** Poll hints while a ticket runs: ask again in about this long. */
export const DEFAULT_POLL_HINT_MS = 1500;
/** How long a running ticket's answer stays fresh. */
const RUNNING_TTL_S = 3;

export interface Preferences {
  mode: 'auto' | 'sync' | 'async';
  max_latency_ms: number;
  progress_granularity: 'none' | 'phase' | 'step';
  poll_long_wait_ms: number;
}

export function preferencesOf(request: Record<string, unknown>): Preferences {
  const p = (request.execution_preferences ?? {}) as Partial<Preferences>;
  return { mode: p.mode ?? 'auto', max_latency_ms: p.max_latency_ms ?? 1500, progress_granularity: p.progress_granularity ?? 'phase', poll_long_wait_ms: p.poll_long_wait_ms ?? 0 };
}

export const isFinished = (row: Pick<TicketRow, 'lifecycle_state'>) => CONTRACT_LIFECYCLE_MACHINE.isTerminal(row.lifecycle_state);

/**
 * ttl_seconds: how long this answer may be cached. A running ticket changes
 * at any moment (3 s); a finished one is final until the ticket expires.
 */
export function ttlSeconds(row: TicketRow, now: number): number {
  if (!isFinished(row)) return RUNNING_TTL_S;
  return Math.max(1, Math.floor((new Date(row.expires_at).getTime() - now) / 1000));
}

/** Suggests the next poll: sooner when the assembly expects to finish soon. */
export function pollHintMs(row: TicketRow): number {
  if (isFinished(row)) return 0;
  return Math.min(DEFAULT_POLL_HINT_MS, Math.max(100, Math.floor((row.expected_latency_ms || DEFAULT_POLL_HINT_MS) / 2)));
}

export function pollDocument(row: TicketRow, steps: StepRow[], now: number): Record<string, unknown> {
  const prefs = preferencesOf(row.request);
  // Progress is work done: a step skipped because the execution halted, or one that failed, is none.
  const halted = row.lifecycle_state === 'FAILED' || row.lifecycle_state === 'CANCELED';
  const done = steps.filter((s) => s.status === 'SUCCEEDED' || (s.status === 'SKIPPED' && !halted)).length;
  const current = steps.find((s) => s.status === 'RUNNING');
  const progress: Record<string, unknown> = { phase: row.phase, percent: row.lifecycle_state === 'COMPLETED' ? 100 : percentOf(row.phase, done, steps.length) };
  if (prefs.progress_granularity !== 'none' && current) progress.current_step = current.step_id;
  if (prefs.progress_granularity === 'step') {
    progress.steps = steps.map((s) => ({
      step_id: s.step_id,
      label: s.label,
      status: s.status,
      ...(s.started_at && { started_at: new Date(s.started_at).toISOString() }),
      ...(s.ended_at && { ended_at: new Date(s.ended_at).toISOString() }),
      ...(s.message && { message: s.message }),
    }));
  }
  const status = row.status;
  return {
    contract: { contract_id: row.contract_id, version: row.contract_version },
    ticket: row.ticket,
    ...(row.next_ticket && { next_ticket: row.next_ticket }),
    status,
    ttl_seconds: ttlSeconds(row, now),
    progress,
    ...(status === 'RUNNING' && row.partial_result && { partial_result: row.partial_result }),
    ...(status === 'SUCCEEDED' && row.result && { result: row.result }),
    ...(status === 'FAILED' && row.error && { error: row.error }),
  };
}
