// A workflow session's phase states: one context blob per session,
// phase-keyed and versioned, that clients can read as any context.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { PhaseDef, WorkflowDefinition } from '../domain/workflow.js';
import { getContext } from '../store/context-store.js';

export type PhaseStates = Record<string, Record<string, unknown>>;

/** The context key of a session's phase states. */
export const stateKey = (sessionId: string) => `workflow-state:${sessionId}`.slice(0, 128);

/** Every phase's state block, empty until the model patches it. */
export async function readStates(em: EntityManager, tenantId: string, sessionId: string, def: WorkflowDefinition): Promise<PhaseStates> {
  const blob = await getContext(em, tenantId, stateKey(sessionId));
  const stored = (blob?.data ?? {}) as PhaseStates;
  return Object.fromEntries(def.phases.map((p) => [p.id, stored[p.id] ?? {}]));
}

/** A phase of the definition; the initial one for a phase a version no longer has. */
export function phaseOf(def: WorkflowDefinition, id: string): PhaseDef {
  return def.phases.find((p) => p.id === id) ?? def.phases.find((p) => p.id === def.initial_phase)!;
}
