// ARCHITECTURE §5: contract executions (tickets), frozen plans, assemblies,
// execution contracts with their transitions (seed 004), snapshots and memory (seed 002).
import { defineEntity, p } from '@mikro-orm/core';

export const Assembly = defineEntity({
  name: 'Assembly',
  tableName: 'assemblies',
  properties: {
    assemblyId: p.string().length(128).primary(),
    version: p.string().length(32).primary(),
    intent: p.string().length(128).index('idx_assemblies_intent'),
    contractId: p.string().length(256).nullable(),
    definition: p.json<Record<string, unknown>>(),
    expectedLatencyMs: p.integer().default(0),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});

export const FrozenPlan = defineEntity({
  name: 'FrozenPlan',
  tableName: 'frozen_plans',
  properties: {
    planId: p.string().length(64).primary(),
    ticket: p.string().length(64).nullable().index('idx_frozen_plans_ticket'),
    assemblyId: p.string().length(128),
    assemblyVersion: p.string().length(32),
    planHash: p.string().length(64),
    plan: p.json<Record<string, unknown>>(),
    replacesPlanId: p.string().length(64).nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});

export const ContractExecution = defineEntity({
  name: 'ContractExecution',
  tableName: 'contract_executions',
  indexes: [{ properties: ['status', 'expiresAt'], name: 'idx_contract_executions_expiry' }],
  properties: {
    ticket: p.string().length(64).primary(),
    contractId: p.string().length(256),
    contractVersion: p.string().length(32),
    requestId: p.string().length(128),
    sessionId: p.string().length(128),
    idempotencyKey: p.string().length(256),
    request: p.json<Record<string, unknown>>(),
    mode: p.string().length(8),
    status: p.string().length(16),
    phase: p.string().length(32),
    lifecycleState: p.string().length(32).default('INIT'),
    percent: p.integer().default(0),
    currentStep: p.string().length(128).nullable(),
    steps: p.json<Record<string, unknown>[]>().nullable(),
    planId: p.string().length(64).nullable(),
    partialResult: p.json<Record<string, unknown>>().nullable(),
    result: p.json<Record<string, unknown>>().nullable(),
    error: p.json<Record<string, unknown>>().nullable(),
    nextTicket: p.string().length(64).nullable(),
    traceId: p.string().length(32),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
    expiresAt: p.datetime(),
    version: p.integer().version(),
  },
});

/** A tracked action: tool call, human confirmation, contract step or agent call. */
export const ExecutionContract = defineEntity({
  name: 'ExecutionContract',
  tableName: 'execution_contracts',
  indexes: [
    { properties: ['sessionId', 'createdAt'], name: 'idx_execution_contracts_session' },
    { properties: ['runId'], name: 'idx_execution_contracts_run' },
  ],
  properties: {
    executionId: p.string().length(64).primary(),
    sessionId: p.string().length(128),
    runId: p.string().length(64).nullable(),
    ticket: p.string().length(64).nullable(),
    subjectId: p.string().length(64).nullable(),
    actionType: p.string().length(32),
    actionSummary: p.text(),
    status: p.string().length(16),
    irreversible: p.boolean().default(false),
    idempotencyKey: p.string().length(256).nullable(),
    timeoutSeconds: p.integer().nullable(),
    result: p.text().nullable(),
    errorMessage: p.text().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    enteredAt: p.datetime().defaultRaw('now()'),
    version: p.integer().version(),
  },
});

export const ExecutionTransition = defineEntity({
  name: 'ExecutionTransition',
  tableName: 'execution_transitions',
  uniques: [{ properties: ['executionId', 'sequenceNumber'], name: 'uq_execution_transitions_seq' }],
  properties: {
    id: p.bigint('string').primary().autoincrement(),
    executionId: p.string().length(64),
    sequenceNumber: p.integer(),
    fromStatus: p.string().length(16),
    toStatus: p.string().length(16),
    trigger: p.string().length(32),
    actor: p.string().length(64),
    actorCategory: p.string().length(16),
    ts: p.datetime().defaultRaw('now()'),
  },
});

/** Seed 002 snapshot of an execution context, for ROLLBACK. */
export const Snapshot = defineEntity({
  name: 'Snapshot',
  tableName: 'snapshots',
  properties: {
    snapshotId: p.string().length(64).primary(),
    ticket: p.string().length(64).index('idx_snapshots_ticket'),
    lifecycleState: p.string().length(32),
    context: p.json<Record<string, unknown>>(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});

/** Seed 002 memory, scoped EPHEMERAL, SESSION or GLOBAL. */
export const Memory = defineEntity({
  name: 'Memory',
  tableName: 'memory',
  indexes: [{ properties: ['scope', 'scopeId', 'key'], name: 'idx_memory_scope_key' }],
  properties: {
    memoryId: p.string().length(64).primary(),
    scope: p.string().length(16),
    scopeId: p.string().length(128),
    key: p.string().length(256),
    value: p.json<unknown>(),
    tags: p.json<string[]>().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
