// The trace events the engine writes (seed 002 TraceEventType payloads), the
// seed error document, and the skip of steps that will never run.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { PolicyDecision, StructuredError } from '../domain/engine-types.js';
import type { AbcError } from '../domain/errors.js';
import type { RoleRun } from './roles/index.js';
import { getSteps, transitionStep, type TicketEventInput } from '../store/ticket-store.js';

export function decisionEvent(run: RoleRun, stepId?: string): TicketEventInput {
  const o = run.output;
  return {
    type: 'AGENT_DECISION',
    payload: {
      role: o.role,
      agents: run.agents,
      success: o.success,
      confidence: o.confidence,
      ...(stepId && { step_id: stepId }),
      ...(o.errors.length && { errors: o.errors.map((e) => ({ code: e.code, message: e.message, suggested_action: e.suggested_action })) }),
      ...(run.llm_calls?.length && { llm_calls: run.llm_calls }),
    },
  };
}

export const errorEvent = (e: StructuredError): TicketEventInput => ({ type: 'ERROR_OCCURRED', payload: { ...e } });
export const policyEvent = (p: PolicyDecision): TicketEventInput => ({ type: 'POLICY_EVALUATION', payload: { ...p } });

/** The seed error shape of an AbcError. */
export function errorDocument(e: AbcError, traceId: string): Record<string, unknown> {
  const p = e.payload;
  return {
    code: p.code,
    category: p.category,
    message: p.message,
    retryable: p.retryable,
    ...(p.retryAfterSeconds !== undefined && { retry_after_seconds: p.retryAfterSeconds }),
    ...(p.details && { details: p.details }),
    trace_id: p.traceId ?? traceId,
  };
}

/** What never started will not start. */
export async function skipPending(tx: EntityManager, ticket: string, message = 'not run: the execution halted'): Promise<void> {
  for (const s of await getSteps(tx, ticket)) if (s.status === 'PENDING') await transitionStep(tx, ticket, s.step_id, 'skip', { message });
}
