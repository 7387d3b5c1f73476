// The engine's execution record: the mutable part of seed 002's
// ExecutionContext that is not a step row or a plan (loop counters, the current
// batch, replan and rollback requests, a pending human request). It lives in
// tickets.engine and changes only with a lifecycle transition.
import { canonicalHash } from '../domain/hash.js';
import type { EngineSettings } from '../domain/engine-policy.js';
import type { Scope, StructuredError } from '../domain/engine-types.js';

export interface HumanRequest {
  kind: 'step_approval' | 'low_confidence' | 'result';
  reason: string;
  step_id: string | null;
  requested_at: string;
  deadline: string;
  /** The seed 004 contract that waits for the human. */
  execution_id: string;
  /** A step's approval in the approvals API (and inbox), decided there or by the ticket's feedback. */
  approval_id?: string;
  /** The hash of the planned input a step's approval is asked for. */
  args_hash?: string;
}

export interface HumanFeedback {
  action: 'continue' | 'replan' | 'reject';
  feedback: string;
  actor: string;
  at: string;
  data?: Record<string, unknown>;
}

export interface ExecRecord {
  settings: EngineSettings | null;
  iteration: number;
  consecutive_failures: number;
  errors: StructuredError[];
  attempts: Record<string, number>;
  local_replans: Record<string, number>;
  global_replans: number;
  replan: { scope: Scope; failed_step_id: string | null } | null;
  rollback: { scope: Scope; failed_step_id: string | null } | null;
  /** Steps a replan puts back, applied by EXECUTION_PREPARE. */
  reset_steps: string[] | null;
  avoid: string[];
  approved_steps: string[];
  /** For each approved step, the hash of the planned input the human approved. */
  approved_inputs: Record<string, string>;
  accepted_result: boolean;
  /** The batch under review; `catch_up` when it only reviews steps finished before (no step ran in it). */
  batch: { id: string; steps: string[]; failures: Record<string, StructuredError>; catch_up?: boolean } | null;
  snapshot_id: string | null;
  /** The snapshot taken when the current plan was prepared (GLOBAL rollback). */
  base_snapshot_id: string | null;
  human: HumanRequest | null;
  feedback: HumanFeedback[];
  hints: { failure_counts: Record<string, number>; similar_successes: unknown[] } | null;
}

const EMPTY: ExecRecord = {
  settings: null,
  iteration: 0,
  consecutive_failures: 0,
  errors: [],
  attempts: {},
  local_replans: {},
  global_replans: 0,
  replan: null,
  rollback: null,
  reset_steps: null,
  avoid: [],
  approved_steps: [],
  approved_inputs: {},
  accepted_result: false,
  batch: null,
  snapshot_id: null,
  base_snapshot_id: null,
  human: null,
  feedback: [],
  hints: null,
};

/** The record of a ticket row (a fresh copy the caller may change before committing it). */
export const recordOf = (row: { engine: Record<string, unknown> | null }): ExecRecord => structuredClone({ ...EMPTY, ...(row.engine as Partial<ExecRecord> | null) });

/**
 * Whether a human approved this step with this planned input. An approval
 * holds for the input it was asked for: a replan that changes the input asks
 * again. (Records from before inputs were kept hold by step.)
 */
export function approvedFor(rec: ExecRecord, stepId: string, plannedInput: Record<string, unknown> | undefined): boolean {
  if (!rec.approved_steps.includes(stepId)) return false;
  const hash = rec.approved_inputs[stepId];
  return hash === undefined || hash === canonicalHash(plannedInput ?? {});
}

/** Keeps the error history bounded. */
export function withError(rec: ExecRecord, error: StructuredError): ExecRecord {
  return { ...rec, errors: [...rec.errors, error].slice(-50) };
}
