// Seed 003: phase workflow definitions.
import { defineEntity, p } from '@mikro-orm/core';

/** Workflow versions are insert-only: the database refuses updates and deletes. */
export const WorkflowRow = defineEntity({
  name: 'WorkflowRow',
  tableName: 'workflows',
  triggers: [{ name: 'workflows_immutable', timing: 'before', events: ['update', 'delete'], body: "RAISE EXCEPTION 'workflow versions are immutable' USING ERRCODE = 'check_violation';" }],
  properties: {
    /** `*` for the platform's (the workflows/ folder), seen by every tenant. */
    tenantId: p.string().length(64).primary(),
    workflowId: p.string().length(128).primary(),
    version: p.string().length(32).primary(),
    definition: p.json<Record<string, unknown>>(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});

/** A session led by a workflow: its phase (the phase machine's state), turns per phase, and the carryover for the next turn. */
export const WorkflowSession = defineEntity({
  name: 'WorkflowSession',
  tableName: 'workflow_sessions',
  properties: {
    sessionId: p.string().length(128).primary(),
    tenantId: p.string().length(64),
    workflowId: p.string().length(128),
    workflowVersion: p.string().length(32),
    phase: p.string().length(64),
    /** Turns taken in each phase: `{kyc: 3}`. */
    phaseTurns: p.json<Record<string, number>>().default('{}'),
    /** The block the next turn receives, written with the move that made it. */
    carryover: p.text().nullable(),
    /** The run of the turn counted last: a resumed turn is not counted twice, and gets its carryover again. */
    turnRunId: p.string().length(64).nullable(),
    /** The carryover the turn of `turnRunId` took. */
    turnCarryover: p.text().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});

/** Every phase move, made or refused: the audit of seed 003's PhaseTransition. Insert-only. */
export const PhaseTransition = defineEntity({
  name: 'PhaseTransition',
  tableName: 'phase_transitions',
  triggers: [{ name: 'phase_transitions_immutable', timing: 'before', events: ['update', 'delete'], body: "RAISE EXCEPTION 'phase transitions are immutable' USING ERRCODE = 'check_violation';" }],
  properties: {
    transitionId: p.string().length(64).primary(),
    sessionId: p.string().length(128).index('idx_phase_transitions_session'),
    tenantId: p.string().length(64),
    workflowId: p.string().length(128),
    workflowVersion: p.string().length(32),
    fromPhase: p.string().length(64),
    toPhase: p.string().length(64),
    trigger: p.string().length(32),
    actor: p.string().length(128),
    reason: p.text(),
    metadata: p.json<Record<string, unknown>>().default('{}'),
    /** False for a move the table does not allow: refused, and recorded. */
    accepted: p.boolean(),
    runId: p.string().length(64).nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
