// Seed 001 §12.2: sessions, messages, runs, the event log, agents, context blobs.
import { defineEntity, p } from '@mikro-orm/core';

export const Session = defineEntity({
  name: 'Session',
  tableName: 'sessions',
  properties: {
    sessionId: p.string().length(64).primary(),
    userId: p.string().length(64),
    tenantId: p.string().length(64),
    createdAt: p.datetime().defaultRaw('now()'),
    metadata: p.json<Record<string, unknown>>().nullable(),
    /** How many events the session has; bumped with each append, so a watcher can tell a batch follows what it has. */
    eventHead: p.bigint('number').default(0),
  },
});

export const Message = defineEntity({
  name: 'Message',
  tableName: 'messages',
  indexes: [{ properties: ['session', 'createdAt'], name: 'idx_messages_session' }],
  properties: {
    messageId: p.string().length(64).primary(),
    session: () => p.manyToOne(Session).fieldName('session_id').mapToPk(),
    runId: p.string().length(64).nullable(),
    role: p.string().length(16),
    content: p.text(),
    createdAt: p.datetime().defaultRaw('now()'),
    metadata: p.json<Record<string, unknown>>().nullable(),
  },
});

export const Run = defineEntity({
  name: 'Run',
  tableName: 'runs',
  indexes: [
    { properties: ['session', 'startedAt'], name: 'idx_runs_session' },
    { properties: ['status', 'leaseUntil'], name: 'idx_runs_lease' },
    { properties: ['tenantId', 'status'], name: 'idx_runs_tenant_status' },
  ],
  uniques: [{ properties: ['session', 'requestId'], name: 'uq_runs_session_request' }],
  properties: {
    runId: p.string().length(64).primary(),
    session: () => p.manyToOne(Session).fieldName('session_id').mapToPk(),
    rootAgentId: p.string().length(64),
    /** The session's tenant, kept on the run so a run token carries it without a join. */
    tenantId: p.string().length(64),
    parentRunId: p.string().length(64).nullable().index('idx_runs_parent'),
    status: p.string().length(32),
    startedAt: p.datetime().defaultRaw('now()'),
    endedAt: p.datetime().nullable(),
    error: p.json<Record<string, unknown>>().nullable(),
    // Extensions: idempotent invoke, tracing, scoped agent token, optimistic lock.
    requestId: p.string().length(128).nullable(),
    traceId: p.string().length(32),
    /** The W3C traceparent of the span that started it: work done for it later (on another core, after an approval, from the queue) continues under it. */
    traceparent: p.string().length(55).nullable(),
    tokenHash: p.string().length(64).nullable(),
    userId: p.string().length(64).nullable(),
    /** Tokens its LLM calls have used, for its token budget. */
    tokensUsed: p.integer().default(0),
    /** The last event seq of this run; bumped in the same transaction as each append. */
    lastSeq: p.integer().default(0),
    /** The core executing the run, and until when; a lapsed lease is recovered by another core. */
    leaseOwner: p.string().length(64).nullable(),
    leaseUntil: p.datetime().nullable(),
    version: p.integer().version(),
  },
});

/** Append-only log. `id` is the global cursor; `seq` is gap-free per run. */
export const Event = defineEntity({
  name: 'Event',
  tableName: 'events',
  indexes: [{ properties: ['sessionId', 'id'], name: 'idx_events_session' }],
  uniques: [{ properties: ['run', 'seq'], name: 'uq_events_run_seq' }],
  properties: {
    id: p.bigint('string').primary().autoincrement(),
    eventId: p.string().length(64).unique(),
    run: () => p.manyToOne(Run).fieldName('run_id').mapToPk(),
    sessionId: p.string().length(64),
    seq: p.integer(),
    /** Gap-free per session (null before the session counted its events). */
    sessionSeq: p.bigint('number').nullable(),
    ts: p.bigint('number'),
    type: p.string().length(64),
    payload: p.json<Record<string, unknown>>().nullable(),
  },
});

export const Agent = defineEntity({
  name: 'Agent',
  tableName: 'agents',
  properties: {
    /** Agent ids are per tenant: two tenants may each have an agent `planner`. */
    tenantId: p.string().length(64).primary(),
    agentId: p.string().length(64).primary(),
    /** The key that registered it: a key with only the agent scope may change only its own agents. */
    ownerKeyId: p.string().length(64).nullable(),
    name: p.string().length(256),
    endpoint: p.string().length(512),
    capabilities: p.json<string[]>().nullable(),
    /** It continues a run from `context.resume` after its core was lost mid-stream. */
    resumable: p.boolean().default(false),
    status: p.string().length(32).default('healthy'),
    lastHeartbeat: p.datetime().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    // Extensions: write-only credentials and health detail.
    authType: p.string().length(32).nullable(),
    authToken: p.text().nullable().hidden(),
    statusReason: p.text().nullable(),
    metadata: p.json<Record<string, unknown>>().nullable(),
    /** Deadline of the next health check; replicas claim due rows with SKIP LOCKED. */
    nextCheckAt: p.datetime().defaultRaw('now()').index('idx_agents_next_check'),
  },
});

export const ContextBlob = defineEntity({
  name: 'ContextBlob',
  tableName: 'context_blobs',
  indexes: [{ properties: ['ownerType', 'ownerId'], name: 'idx_context_blobs_owner' }],
  properties: {
    /** Keys are per tenant: a key another tenant uses is no sign of anything. */
    tenantId: p.string().length(64).primary(),
    contextKey: p.string().length(128).primary(),
    ownerType: p.string().length(32),
    ownerId: p.string().length(64),
    version: p.integer().default(1),
    data: p.json<unknown>().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});

/** Every version of a context blob, so older versions stay readable. */
export const ContextBlobVersion = defineEntity({
  name: 'ContextBlobVersion',
  tableName: 'context_blob_versions',
  properties: {
    tenantId: p.string().length(64).primary(),
    contextKey: p.string().length(128).primary(),
    version: p.integer().primary(),
    data: p.json<unknown>().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});

/** Live IM connections, so any core can tell whether a session has a client to run a client tool. */
export const ClientConnection = defineEntity({
  name: 'ClientConnection',
  tableName: 'client_connections',
  indexes: [{ properties: ['sessionId', 'seenAt'], name: 'idx_client_connections_session' }],
  properties: {
    connectionId: p.string().length(64).primary(),
    sessionId: p.string().length(64).primary(),
    userId: p.string().length(64),
    coreId: p.string().length(64),
    seenAt: p.datetime().defaultRaw('now()'),
  },
});
