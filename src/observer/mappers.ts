// Seed 004 views in their proto shapes.
import type { ExecutionConsequenceView as ConsequenceMessage, ExecutionSnapshot as SnapshotMessage, ExecutionStatus, TransitionRecord as TransitionMessage } from '../../gen/abc/observer/v1/views.js';
import { enumOf } from '../grpc/mappers.js';
import type { ExecutionConsequenceView, ExecutionSnapshot, TransitionRecord } from '../domain/execution-views.js';

const status = (s: string) => enumOf<ExecutionStatus>('EXECUTION_STATUS', s);
const opt = <T>(v: T | null) => v ?? undefined;

export const toSnapshotMessage = (s: ExecutionSnapshot): SnapshotMessage => ({
  executionId: s.execution_id,
  actionType: s.action_type,
  actionSummary: s.action_summary,
  currentStatus: status(s.current_status),
  enteredAt: s.entered_at,
  durationInStateMs: s.duration_in_state_ms,
  isTerminal: s.is_terminal,
  isStable: s.is_stable,
  isResumable: s.is_resumable,
  hasSideEffects: s.has_side_effects,
  irreversible: s.irreversible,
  idempotencyKey: opt(s.idempotency_key),
  timeoutSeconds: opt(s.timeout_seconds),
  result: opt(s.result),
  errorMessage: opt(s.error_message),
  transitionCount: s.transition_count,
  lastActor: opt(s.last_actor),
  lastTrigger: opt(s.last_trigger),
  sessionId: s.session_id,
  runId: s.run_id ?? '',
  createdAt: s.created_at,
});

export const toTransitionMessage = (t: TransitionRecord): TransitionMessage => ({
  executionId: t.execution_id,
  sequenceNumber: t.sequence_number,
  fromStatus: status(t.from_status),
  toStatus: status(t.to_status),
  trigger: t.trigger,
  actor: t.actor,
  actorCategory: t.actor_category,
  timestamp: t.timestamp,
  isTerminalTransition: t.is_terminal_transition,
});

export const toConsequenceMessage = (v: ExecutionConsequenceView): ConsequenceMessage => ({
  executionId: v.execution_id,
  actionType: v.action_type,
  actionSummary: v.action_summary,
  consequenceLabel: v.consequence_label,
  result: opt(v.result),
  errorMessage: opt(v.error_message),
  hasSideEffects: v.has_side_effects,
  wasSuspended: v.was_suspended,
  isStillPending: v.is_still_pending,
  totalDurationMs: opt(v.total_duration_ms),
});
