// ARCHITECTURE §5: contract executions (tickets), frozen plans, assemblies,
// execution contracts with their transitions (seed 004), snapshots and memory (seed 002).
import { defineEntity, p } from '@mikro-orm/core';

/** Contract versions registered through the API; insert-only: the database refuses updates and deletes. */
export const ContractVersionRow = defineEntity({
  name: 'ContractVersionRow',
  tableName: 'contract_versions',
  triggers: [{ name: 'contract_versions_immutable', timing: 'before', events: ['update', 'delete'], body: "RAISE EXCEPTION 'contract versions are immutable' USING ERRCODE = 'check_violation';" }],
  properties: {
    /** `*` for the platform's, seen by every tenant. */
    tenantId: p.string().length(64).primary(),
    contractId: p.string().length(128).primary(),
    version: p.string().length(32).primary(),
    intent: p.string().length(128),
    definition: p.json<Record<string, unknown>>(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});

/** Versions are immutable: the database refuses updates. */
export const Assembly = defineEntity({
  name: 'Assembly',
  tableName: 'assemblies',
  triggers: [{ name: 'assemblies_immutable', timing: 'before', events: ['update'], body: "RAISE EXCEPTION 'assembly versions are immutable' USING ERRCODE = 'check_violation';" }],
  properties: {
    /** `*` for the platform's (assembly files and packs), seen by every tenant; a tenant's own assembly for an intent wins. */
    tenantId: p.string().length(64).primary(),
    assemblyId: p.string().length(128).primary(),
    version: p.string().length(32).primary(),
    intent: p.string().length(128).index('idx_assemblies_intent'),
    contractId: p.string().length(256).nullable(),
    definition: p.json<Record<string, unknown>>(),
    expectedLatencyMs: p.integer().default(0),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});

/** Frozen plans are insert-only: the database refuses updates and deletes. */
export const FrozenPlan = defineEntity({
  name: 'FrozenPlan',
  tableName: 'frozen_plans',
  triggers: [{ name: 'frozen_plans_immutable', timing: 'before', events: ['update', 'delete'], body: "RAISE EXCEPTION 'frozen plans are immutable' USING ERRCODE = 'check_violation';" }],
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

export const Ticket = defineEntity({
  name: 'Ticket',
  tableName: 'tickets',
  indexes: [
    { properties: ['status', 'expiresAt'], name: 'idx_tickets_expiry' },
    { properties: ['leaseExpiresAt'], name: 'idx_tickets_lease' },
  ],
  uniques: [{ properties: ['tenantId', 'contractId', 'idempotencyKey'], name: 'uq_tickets_idempotency' }],
  properties: {
    ticket: p.string().length(64).primary(),
    tenantId: p.string().length(64),
    contractId: p.string().length(256),
    contractVersion: p.string().length(32),
    requestId: p.string().length(128),
    sessionId: p.string().length(128),
    idempotencyKey: p.string().length(256),
    /** SHA-256 of the canonical request, without its per-attempt correlation fields. */
    requestHash: p.string().length(64).default(''),
    request: p.json<Record<string, unknown>>(),
    assemblyId: p.string().length(128).nullable(),
    assemblyVersion: p.string().length(32).nullable(),
    expectedLatencyMs: p.integer().default(0),
    mode: p.string().length(8),
    status: p.string().length(16),
    phase: p.string().length(32),
    lifecycleState: p.string().length(32).default('INIT'),
    planId: p.string().length(64).nullable(),
    // json, not jsonb: the documents go back to callers in the order they were built.
    partialResult: p.json<Record<string, unknown>>().columnType('json').nullable(),
    result: p.json<Record<string, unknown>>().columnType('json').nullable(),
    error: p.json<Record<string, unknown>>().columnType('json').nullable(),
    nextTicket: p.string().length(64).nullable(),
    /** The packaged output in `output_spec.format` (markdown text or JSON). */
    artifact: p.text().nullable(),
    artifactMediaType: p.string().length(64).nullable(),
    warnings: p.json<string[]>().nullable(),
    traceId: p.string().length(32),
    /** The W3C traceparent of the span that started it: work done for it later (on another core, after an approval, from the queue) continues under it. */
    traceparent: p.string().length(55).nullable(),
    /** Seed 002's execution record: loop counters, the current batch, replan and rollback scope, a pending human request. */
    engine: p.json<Record<string, unknown>>().defaultRaw(`'{}'::jsonb`),
    /** When a WAIT_HUMAN execution times out. */
    humanDeadline: p.datetime().nullable(),
    /** The queue worker executing the ticket, and until when its claim holds. */
    leaseOwner: p.string().length(64).nullable(),
    leaseExpiresAt: p.datetime().nullable(),
    startedAt: p.datetime().nullable(),
    finishedAt: p.datetime().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
    expiresAt: p.datetime(),
    version: p.integer().version(),
    /** How many events the ticket has; bumped with each append, under the row lock, so the next seq needs no read. */
    eventSeq: p.integer().default(0),
  },
});

/** One step of a ticket's frozen plan; a finished step's output is never recomputed. */
export const ContractStep = defineEntity({
  name: 'ContractStep',
  tableName: 'ticket_steps',
  properties: {
    ticket: p.string().length(64).primary(),
    stepId: p.string().length(64).primary(),
    position: p.integer(),
    label: p.string().length(256),
    capability: p.string().length(128),
    /** The capability has side effects: a rollback keeps the step once it succeeded, never re-runs it. */
    sideEffect: p.boolean().default(false),
    status: p.string().length(16),
    output: p.json<unknown>().nullable(),
    message: p.text().nullable(),
    startedAt: p.datetime().nullable(),
    endedAt: p.datetime().nullable(),
  },
});

/** The append-only progress log of a ticket; `id` is a global cursor. */
export const TicketEvent = defineEntity({
  name: 'TicketEvent',
  tableName: 'ticket_events',
  uniques: [{ properties: ['ticket', 'seq'], name: 'uq_ticket_events_seq' }],
  properties: {
    id: p.bigint('string').primary().autoincrement(),
    ticket: p.string().length(64),
    seq: p.integer(),
    ts: p.bigint('number'),
    type: p.string().length(64),
    payload: p.json<Record<string, unknown>>().nullable(),
  },
});

/** A tracked action: tool call, human confirmation, contract step or agent call. */
export const ExecutionContract = defineEntity({
  name: 'ExecutionContract',
  tableName: 'execution_contracts',
  indexes: [
    { properties: ['sessionId', 'createdAt'], name: 'idx_execution_contracts_session' },
    { properties: ['runId', 'subjectId'], name: 'idx_execution_contracts_run_subject' },
    { properties: ['ticket', 'subjectId'], name: 'idx_execution_contracts_subject' },
    // Seed 004 resume alignment looks for a completed irreversible action by key and session.
    // No index names `status`, so a contract's moves can be HOT updates.
    {
      name: 'idx_execution_contracts_irreversible_key',
      expression: 'create index "idx_execution_contracts_irreversible_key" on "execution_contracts" ("idempotency_key", "session_id") where irreversible',
    },
  ],
  properties: {
    executionId: p.string().length(64).primary(),
    /** The tenant of its run or ticket. */
    tenantId: p.string().length(64),
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
  uniques: [{ properties: ['tenantId', 'scope', 'scopeId', 'key'], name: 'uq_memory_scope_key' }],
  indexes: [
    // Full-text search (seed 002 Memory.search) over GLOBAL memory's stored document; store/memory.ts queries it.
    { name: 'idx_memory_search', expression: `create index "idx_memory_search" on "memory" using gin ("search") where scope = 'GLOBAL'` },
    // Keys by prefix (success cases, failure patterns), in byte order whatever the database's collation; store/memory.ts keyPrefix.
    { name: 'idx_memory_key_bytes', expression: `create index "idx_memory_key_bytes" on "memory" ("tenant_id", "scope", "scope_id", "key" collate "C")` },
  ],
  properties: {
    memoryId: p.string().length(64).primary(),
    tenantId: p.string().length(64),
    scope: p.string().length(16),
    scopeId: p.string().length(128),
    key: p.string().length(256),
    value: p.json<unknown>(),
    tags: p.json<string[]>().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    /** GLOBAL memory's full-text document, kept by PostgreSQL; never written or read through the ORM. */
    search: p.string().columnType('tsvector').generated("(case when scope = 'GLOBAL' then to_tsvector('simple', key || ' ' || coalesce(value::text, '')) else null end) stored").lazy().nullable(),
  },
});
