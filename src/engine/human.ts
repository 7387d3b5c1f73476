// WAIT_HUMAN: an execution waits durably for a person. The request lives in
// the execution record, a seed 004 `human_input` contract waits, and a queue
// job is set for the deadline. The answer, its transition and the job that
// resumes the execution commit together.
import type { EntityManager } from '@mikro-orm/postgresql';
import { DEFAULT_SETTINGS } from '../domain/engine-policy.js';
import { AbcError } from '../domain/errors.js';
import { moveContract, moveContractThrough, openContract } from '../store/execution-contracts.js';
import { errorDocument, errorEvent, skipPending } from './events.js';
import type { Memory } from '../store/memory.js';
import type { ContractQueue } from '../store/ticket-queue.js';
import { recordOf, type ExecRecord, type HumanFeedback } from './record.js';
import { toStructured } from './structured.js';
import { canonicalHash } from '../domain/hash.js';
import { newId } from '../runtime/new-id.js';
import { insertStepApproval, settleStepApproval } from '../store/tool-call-store.js';
import { appendTicketEvents, getTicket, transitionStep, transitionTicket, type TicketEventInput, type TicketRow } from '../store/ticket-store.js';

export interface HumanAsk {
  kind: 'step_approval' | 'low_confidence' | 'result';
  stepId: string | null;
  reason: string;
  /** A step to approve: what it would call, with what input (shown to the approver, and hashed). */
  step?: { capability: string; input: Record<string, unknown> };
}

/** The execution contract of the pending human request. */
const subjectOf = (rec: ExecRecord, stepId = rec.human?.step_id) => `human:${rec.feedback.length + 1}:${stepId ?? 'result'}`;

const states = (moves: unknown[]): TicketEventInput[] => moves.filter(Boolean).map((m) => ({ type: 'execution_state', payload: { ...(m as object) } }));

/** Suspends the execution for a human: a waiting execution contract, a deadline, and a queue job at the deadline. */
export async function awaitHuman(tx: EntityManager, queue: ContractQueue, row: TicketRow, rec: ExecRecord, ask: HumanAsk, trace: TicketEventInput[]): Promise<void> {
  const settings = rec.settings ?? DEFAULT_SETTINGS;
  const deadline = new Date(Date.now() + settings.human_timeout_ms);
  const subject = subjectOf(rec, ask.stepId);
  const executionId = await openContract(tx, {
    sessionId: row.session_id,
    ticket: row.ticket,
    subjectId: subject,
    actionType: 'human_input',
    actionSummary: `human input → ${ask.reason}`,
    irreversible: false,
    timeoutSeconds: Math.ceil(settings.human_timeout_ms / 1000),
  });
  const [started, waiting] = await moveContractThrough(tx, { ticket: row.ticket, subjectId: subject }, [
    { trigger: 'start', actor: 'graph_runner' },
    { trigger: 'suspend', actor: 'ecs_node' },
  ]);
  if (ask.kind === 'step_approval' && ask.stepId) await transitionStep(tx, row.ticket, ask.stepId, 'await_human', { message: `waiting for human approval: ${ask.reason}` });
  // A step to approve is in the approvals API and its inbox too, until the same deadline.
  const approvalId = ask.kind === 'step_approval' && ask.stepId && ask.step ? newId('ap') : undefined;
  if (approvalId) {
    await insertStepApproval(tx, {
      approvalId, ticket: row.ticket, stepId: ask.stepId!, capability: ask.step!.capability, sessionId: row.session_id, tenantId: row.tenant_id,
      summary: `${ask.step!.capability}(${JSON.stringify(ask.step!.input).slice(0, 200)}): ${ask.reason}`.slice(0, 500), argsHash: canonicalHash(ask.step!.input), expiresAt: deadline,
    });
  }
  const human = {
    kind: ask.kind, reason: ask.reason, step_id: ask.stepId, requested_at: new Date().toISOString(), deadline: deadline.toISOString(), execution_id: executionId,
    ...(approvalId && { approval_id: approvalId, args_hash: canonicalHash(ask.step!.input) }),
  };
  await transitionTicket(tx, row.ticket, 'human_required', { engine: { ...rec, human }, human_deadline: deadline }, 'engine', {
    trace: [...trace, { type: 'HUMAN_INTERACTION', payload: { direction: 'requested', ...human } }, ...states([started, waiting])],
    reason: ask.reason,
  });
  // The deadline is a queue job: whichever worker is alive then times the wait out.
  await queue.enqueue(tx, row.ticket, deadline);
}

/** A worker met a waiting execution: past its deadline it fails; before, the deadline job is put back. */
export async function checkHumanDeadline(tx: EntityManager, queue: ContractQueue, row: TicketRow, rec: ExecRecord): Promise<void> {
  const current = (await getTicket(tx, row.ticket, true))!;
  if (current.lifecycle_state !== 'WAIT_HUMAN') return;
  const deadline = current.human_deadline ? new Date(current.human_deadline) : new Date(0);
  if (deadline.getTime() > Date.now()) return queue.enqueue(tx, row.ticket, deadline);
  const human = rec.human;
  const moved = human && (await moveContract(tx, { ticket: row.ticket, subjectId: subjectOf(rec) }, 'fail', 'graph_runner', { errorMessage: 'no human answered before the deadline' }));
  if (human?.approval_id) await settleStepApproval(tx, human.approval_id, 'expire', 'system', 'no human answered before the deadline', row.trace_id);
  await skipPending(tx, row.ticket);
  const error = new AbcError('DEADLINE_EXCEEDED', {
    code: 'HUMAN_TIMEOUT',
    category: 'TIMEOUT',
    message: `no human input before ${deadline.toISOString()}: ${human?.reason ?? ''}`.trim(),
    retryable: false,
    details: { deadline: deadline.toISOString() },
  });
  await transitionTicket(tx, row.ticket, 'human_timeout', { error: errorDocument(error, row.trace_id), engine: { ...rec, human: null }, human_deadline: null }, 'system', {
    trace: [{ type: 'HUMAN_INTERACTION', payload: { direction: 'timed_out', ...human } }, errorEvent(toStructured(error)), ...states([moved])],
    reason: 'the human wait timed out',
  });
}

/** submit_human_feedback inside `tx`: continue, replan or reject a WAIT_HUMAN execution. */
export async function answerHuman(tx: EntityManager, queue: ContractQueue, memory: Memory, ticket: string, input: Omit<HumanFeedback, 'at'>): Promise<TicketRow> {
  const row = await getTicket(tx, ticket, true);
  if (!row) throw new AbcError('NOT_FOUND', { code: 'TICKET_NOT_FOUND', category: 'VALIDATION', message: `ticket ${ticket} does not exist`, retryable: false });
  if (row.lifecycle_state !== 'WAIT_HUMAN') {
    throw new AbcError('FAILED_PRECONDITION', {
      code: 'NOT_WAITING_FOR_HUMAN',
      category: 'VALIDATION',
      message: `ticket ${ticket} is ${row.lifecycle_state}, not waiting for human input`,
      retryable: false,
      details: { ticket, lifecycle_state: row.lifecycle_state },
    });
  }
  const rec = recordOf(row);
  const human = rec.human;
  const feedback: HumanFeedback = { ...input, at: new Date().toISOString() };
  const next: ExecRecord = { ...rec, human: null, feedback: [...rec.feedback, feedback] };
  // Continuing approves the held step, or accepts the reviewed step or result.
  if (input.action === 'continue' && human?.step_id) {
    next.approved_steps = [...rec.approved_steps, human.step_id];
    if (human.args_hash) next.approved_inputs = { ...rec.approved_inputs, [human.step_id]: human.args_hash };
  }
  if (input.action === 'continue' && human?.kind === 'result') next.accepted_result = true;
  if (input.action === 'replan') next.replan = { scope: 'GLOBAL', failed_step_id: human?.step_id ?? null };
  if (human?.approval_id) await settleStepApproval(tx, human.approval_id, input.action === 'continue' ? 'approve' : 'reject', input.actor, input.feedback || input.action, row.trace_id);
  await memory.store(row.tenant_id, `human_feedback:${next.feedback.length}`, { ...feedback, request: human }, 'SESSION', ticket, ['human_feedback'], tx);
  const where = { ticket, subjectId: subjectOf(rec) };
  const moves =
    input.action === 'reject'
      ? await moveContractThrough(tx, where, [{ trigger: 'reject', actor: 'human' }])
      : await moveContractThrough(tx, where, [{ trigger: 'resume', actor: 'human' }, { trigger: 'succeed', actor: 'ecs_node' }], { result: input.feedback.slice(0, 200) });
  const trace: TicketEventInput[] = [{ type: 'HUMAN_INTERACTION', payload: { direction: 'answered', action: input.action, actor: input.actor, feedback: input.feedback, request: human } }, ...states(moves)];
  if (input.action === 'reject') {
    await skipPending(tx, ticket);
    const error = new AbcError('FAILED_PRECONDITION', { code: 'HUMAN_REJECTED', category: 'EXECUTION', message: `rejected by ${input.actor}${input.feedback ? `: ${input.feedback}` : ''}`, retryable: false });
    return transitionTicket(tx, ticket, 'human_reject', { error: errorDocument(error, row.trace_id), engine: { ...next }, human_deadline: null }, 'human', { trace, reason: 'a human rejected' });
  }
  const updated = await transitionTicket(tx, ticket, input.action === 'replan' ? 'human_replan' : 'human_continue', { engine: { ...next }, human_deadline: null }, 'human', { trace, reason: `a human asked to ${input.action}` });
  await queue.enqueue(tx, ticket);
  return updated;
}

/** A cancelled execution no longer waits for anyone: its human request is cancelled too. */
export async function withdrawHuman(tx: EntityManager, row: TicketRow, rec: ExecRecord): Promise<void> {
  if (row.lifecycle_state !== 'WAIT_HUMAN' || !rec.human) return;
  const moved = await moveContract(tx, { ticket: row.ticket, subjectId: subjectOf(rec) }, 'cancel', 'human');
  if (rec.human.approval_id) await settleStepApproval(tx, rec.human.approval_id, 'expire', 'system', 'the ticket was cancelled', row.trace_id);
  await appendTicketEvents(tx, row.ticket, [{ type: 'HUMAN_INTERACTION', payload: { direction: 'withdrawn', ...rec.human } }, ...states([moved])]);
}
