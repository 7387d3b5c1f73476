// Seed 001 §12.2: tools, tool calls, approvals; plus policies.
import { defineEntity, p } from '@mikro-orm/core';
import { Run } from './im.js';

export const Tool = defineEntity({
  name: 'Tool',
  tableName: 'tools',
  properties: {
    /** `*` for the platform's tools (built-ins, ABC_TOOLS_FILE), seen by every tenant; a tenant's own tool of the same name wins. */
    tenantId: p.string().length(64).primary(),
    toolName: p.string().length(128).primary(),
    kind: p.string().length(16),
    policy: p.json<Record<string, unknown>>().nullable(),
    timeoutMs: p.integer().default(60000),
    metadata: p.json<Record<string, unknown>>().nullable(),
    // Extensions from seed 002 BaseTool.
    version: p.string().length(32).default('1.0.0'),
    description: p.text().nullable(),
    inputSchema: p.json<Record<string, unknown>>().nullable(),
    outputSchema: p.json<Record<string, unknown>>().nullable(),
    permissionLevel: p.string().length(16).default('PUBLIC'),
    sideEffect: p.boolean().default(false),
    endpoint: p.string().length(512).nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});

export const ToolCall = defineEntity({
  name: 'ToolCall',
  tableName: 'tool_calls',
  indexes: [
    { properties: ['run'], name: 'idx_tool_calls_run' },
    // The open calls the timer sweeps look for (tool-call-store.ts overdueCalls, orphanCalls): ended calls leave it.
    {
      name: 'idx_tool_calls_open',
      expression: `create index "idx_tool_calls_open" on "tool_calls" ("status", "deadline_at") where status in ('APPROVED', 'DISPATCHED', 'RUNNING')`,
    },
    // The calls of a time window (store/metrics-reads.ts toolMetrics): calls are written in time order, so block ranges suffice.
    { name: 'idx_tool_calls_created', expression: `create index "idx_tool_calls_created" on "tool_calls" using brin ("created_at") with (pages_per_range = 32, autosummarize = on)` },
  ],
  properties: {
    toolCallId: p.string().length(64).primary(),
    run: () => p.manyToOne(Run).fieldName('run_id').mapToPk(),
    toolName: p.string().length(128),
    kind: p.string().length(16),
    status: p.string().length(32),
    args: p.json<Record<string, unknown>>().nullable(),
    result: p.json<unknown>().nullable(),
    error: p.json<Record<string, unknown>>().nullable(),
    approvalId: p.string().length(64).nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    completedAt: p.datetime().nullable(),
    // Extensions: idempotency, timers, optimistic lock.
    idempotencyKey: p.string().length(256).nullable(),
    startedAt: p.datetime().nullable(),
    deadlineAt: p.datetime().nullable(),
    /** The timeout this call runs with (the invoke's, else the tool's). */
    timeoutMs: p.integer().nullable(),
    /** The W3C traceparent of the span that started it: work done for it later (on another core, after an approval, from the queue) continues under it. */
    traceparent: p.string().length(55).nullable(),
    version: p.integer().version(),
  },
});

export const Approval = defineEntity({
  name: 'Approval',
  tableName: 'approvals',
  indexes: [
    { properties: ['run'], name: 'idx_approvals_run' },
    { properties: ['status', 'expiresAt'], name: 'idx_approvals_expiry' },
    // Pages of a tenant's inbox and of a session's approvals, oldest first (tool-call-store.ts listApprovals).
    { properties: ['tenantId', 'createdAt', 'approvalId'], name: 'idx_approvals_tenant_created' },
    { properties: ['sessionId', 'createdAt', 'approvalId'], name: 'idx_approvals_session_created' },
  ],
  properties: {
    approvalId: p.string().length(64).primary(),
    /** An agent's tool call waits on it (run and tool call), or a contract's plan step (ticket and step). */
    run: () => p.manyToOne(Run).fieldName('run_id').mapToPk().nullable().deleteRule('no action'),
    toolCall: () => p.manyToOne(ToolCall).fieldName('tool_call_id').mapToPk().nullable().deleteRule('no action'),
    ticket: p.string().length(64).nullable().index('idx_approvals_ticket'),
    stepId: p.string().length(64).nullable(),
    /** What the step would call (`tool.x` or a unit); a tool call's tool is on the call. */
    capability: p.string().length(128).nullable(),
    tenantId: p.string().length(64),
    status: p.string().length(32).default('PENDING'),
    createdAt: p.datetime().defaultRaw('now()'),
    decidedAt: p.datetime().nullable(),
    decidedBy: p.string().length(64).nullable(),
    reason: p.text().nullable(),
    // Extensions: expiry timer, what the approver is shown, optimistic lock.
    expiresAt: p.datetime(),
    sessionId: p.string().length(64),
    argsSummary: p.text().nullable(),
    /** SHA-256 of the exact args approved; a decision applies to these args only. */
    argsHash: p.string().length(64).nullable(),
    version: p.integer().version(),
  },
});

/** A policy document; one version is active per tenant, and one for the platform (`*`). */
export const Policy = defineEntity({
  name: 'Policy',
  tableName: 'policies',
  properties: {
    policyId: p.string().length(64).primary(),
    tenantId: p.string().length(64).index('idx_policies_tenant'),
    version: p.integer(),
    document: p.json<Record<string, unknown>>(),
    active: p.boolean().default(false),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
