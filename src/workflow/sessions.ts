// A workflow session as a client sees it, and the client's own phase move:
// a `route` transition of the table (seed 003's "advance to stress test"),
// through the same audited writer as a turn's moves.
import type { EntityManager } from '@mikro-orm/postgresql';
import { requireSession, type Principal } from '../access/principal.js';
import { notFound } from '../domain/errors.js';
import { carryoverOf } from '../domain/phase-turn.js';
import { phaseMachine } from '../domain/workflow.js';
import { getSession } from '../store/session-store.js';
import { movePhase, phaseTransitions, readWorkflowSession, type PhaseTransitionRow, type WorkflowSessionRow } from '../store/workflow-sessions.js';
import type { Workflows } from './registry.js';
import { phaseOf, readStates, type PhaseStates } from './state.js';

export interface WorkflowSessionView {
  session: WorkflowSessionRow;
  states: PhaseStates;
  moves: PhaseTransitionRow[];
}

export class WorkflowSessions {
  constructor(
    readonly em: () => EntityManager,
    readonly workflows: Workflows,
  ) {}

  /** A session the caller may see that a workflow leads; another's, or one no workflow leads, is not found. */
  async get(principal: Principal | null, sessionId: string): Promise<WorkflowSessionView> {
    const { row } = await this.#visible(principal, sessionId);
    const def = (await this.workflows.get(row.tenant_id, row.workflow_id, row.workflow_version)).definition;
    return { session: row, states: await readStates(this.em(), row.tenant_id, sessionId, def), moves: await phaseTransitions(this.em(), sessionId) };
  }

  /** Moves the session on the client's request, if its table has that `route` transition; a refusal is recorded, then thrown. */
  async advance(principal: Principal | null, sessionId: string, to: string, reason: string): Promise<WorkflowSessionView> {
    const { row, userId } = await this.#visible(principal, sessionId);
    const def = (await this.workflows.get(row.tenant_id, row.workflow_id, row.workflow_version)).definition;
    const states = await readStates(this.em(), row.tenant_id, sessionId, def);
    const why = reason || 'the client asked';
    const moved = await this.em().transactional((tx) =>
      movePhase(tx, phaseMachine(def), {
        sessionId, to, trigger: 'route', actor: `client:${userId}`, reason: why, carryover: carryoverOf(phaseOf(def, row.phase), { from: row.phase, to, reason: why }, states),
      }),
    );
    if (!moved.ok) throw moved.error;
    return this.get(principal, sessionId);
  }

  async #visible(principal: Principal | null, sessionId: string): Promise<{ row: WorkflowSessionRow; userId: string }> {
    const session = await getSession(this.em(), sessionId);
    requireSession(principal, session, sessionId);
    const row = await readWorkflowSession(this.em(), sessionId);
    if (!row) throw notFound('workflow session', sessionId);
    return { row, userId: session!.userId };
  }
}
