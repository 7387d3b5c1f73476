// gRPC handlers of the tool and approval services.
import { type ApprovalServiceService, type Approval as ApprovalMessage, ApprovalStatus, Decision } from '../../gen/abc/orchestrator/v1/approval.js';
import {
  PermissionLevel,
  ToolCallStatus,
  ToolInvokeStatus,
  ToolKind,
  ToolServiceService,
  type Tool as ToolMessage,
  type ToolCall as ToolCallMessage,
} from '../../gen/abc/orchestrator/v1/tool.js';
import { storedErrorMessage } from '../grpc/errors.js';
import { defaultUser, requireKey, tenantOf } from '../access/principal.js';
import { targetTenant } from '../access/scopes.js';
import type { SecretInfo } from '../access/secrets.js';
import type { ApprovalState } from '../domain/approval.machine.js';
import { invalidRequest, pageLimit, unauthenticated } from '../domain/errors.js';
import type { ServiceHandlers } from '../grpc/bind.js';
import { enumOf, millis } from '../grpc/mappers.js';
import type { Orm } from '../store/orm.js';
import type { ApprovalRow, ToolCallRow, ToolCalls } from './tool-calls.js';
import { listTools, type ToolKind as Kind, type ToolRow } from '../store/tool-store.js';
import { upsertTool } from './tool-registry.js';

const KIND_TO_PROTO: Record<string, ToolKind> = { builtin: ToolKind.TOOL_KIND_SERVER_BUILTIN, http: ToolKind.TOOL_KIND_SERVER_HTTP, client: ToolKind.TOOL_KIND_CLIENT };
const KIND_FROM_PROTO: Partial<Record<ToolKind, Kind>> = Object.fromEntries(Object.entries(KIND_TO_PROTO).map(([k, v]) => [v, k as Kind]));

export const toToolMessage = (t: ToolRow): ToolMessage => ({
  name: t.name,
  kind: KIND_TO_PROTO[t.kind] ?? ToolKind.TOOL_KIND_UNSPECIFIED,
  version: t.version,
  description: t.description ?? '',
  inputSchema: t.inputSchema ?? undefined,
  outputSchema: t.outputSchema ?? undefined,
  timeoutMs: t.timeoutMs,
  permissionLevel: enumOf<PermissionLevel>('PERMISSION_LEVEL', t.permissionLevel),
  sideEffect: t.sideEffect,
  endpoint: t.endpoint ?? '',
  policy: undefined,
  metadata: t.metadata ?? undefined,
});

/** A tool call's error; a timeout, or a client that was offline, is worth retrying. */
const toolError = (e: { code: string; message: string }) => storedErrorMessage(e);

export const toToolCallMessage = (c: ToolCallRow): ToolCallMessage => ({
  toolCallId: c.toolCallId,
  runId: c.runId,
  toolName: c.toolName,
  kind: KIND_TO_PROTO[c.kind as Kind] ?? ToolKind.TOOL_KIND_UNSPECIFIED,
  status: enumOf<ToolCallStatus>('TOOL_CALL_STATUS', c.status),
  args: c.args,
  result: c.result ?? undefined,
  error: c.error ? toolError(c.error) : undefined,
  approvalId: c.approvalId ?? '',
  idempotencyKey: c.idempotencyKey ?? '',
  timestamps: { createdAt: millis(c.createdAt), startedAt: millis(c.startedAt), completedAt: millis(c.completedAt) },
  deadlineTs: millis(c.deadlineAt),
});

export const toApprovalMessage = (a: ApprovalRow): ApprovalMessage => ({
  approvalId: a.approvalId,
  runId: a.runId ?? '',
  toolCallId: a.toolCallId ?? '',
  ticket: a.ticket ?? '',
  stepId: a.stepId ?? '',
  status: enumOf<ApprovalStatus>('APPROVAL_STATUS', a.status),
  createdAt: millis(a.createdAt),
  decidedAt: millis(a.decidedAt),
  decidedBy: a.decidedBy ?? '',
  reason: a.reason ?? '',
  expiresAt: millis(a.expiresAt),
  toolName: a.toolName,
  argsSummary: a.argsSummary ?? '',
  sessionId: a.sessionId,
});

const toSecretInfo = (s: SecretInfo) => ({ name: s.name, version: s.version, createdAt: millis(s.createdAt), retiresAt: millis(s.retiresAt) });

export function toolHandlers(orm: Orm, calls: ToolCalls, defaultTimeoutMs: number): ServiceHandlers<typeof ToolServiceService> {
  const em = () => orm.em.fork();
  return {
    async registerTool(req, ctx) {
      const { tenantId } = requireKey(ctx.principal);
      const t = req.tool;
      if (!t) throw invalidRequest('tool is required', 'tool');
      const kind = KIND_FROM_PROTO[t.kind];
      if (!kind) throw invalidRequest('kind must be server builtin, server http or client', 'kind');
      const tool = await upsertTool(em(), calls.kinds, tenantId, {
        name: t.name,
        kind,
        version: t.version || '1.0.0',
        description: t.description || null,
        inputSchema: t.inputSchema ?? null,
        outputSchema: t.outputSchema ?? null,
        timeoutMs: t.timeoutMs || defaultTimeoutMs,
        permissionLevel: (t.permissionLevel === PermissionLevel.PERMISSION_LEVEL_UNSPECIFIED ? 'PUBLIC' : t.permissionLevel.replace(/^PERMISSION_LEVEL_/, '')) as ToolRow['permissionLevel'],
        sideEffect: t.sideEffect,
        endpoint: t.endpoint || null,
        metadata: t.metadata ?? null,
      });
      calls.tools.forget();
      return { tool: toToolMessage(tool) };
    },
    async listTools(_req, ctx) {
      return { tools: (await listTools(em(), tenantOf(ctx.principal))).map(toToolMessage) };
    },
    async invokeTool(req, ctx) {
      const outcome = await calls.invoke(ctx.principal, {
        toolName: req.toolName,
        runId: req.runId,
        args: req.args ?? {},
        idempotencyKey: req.idempotencyKey || undefined,
        timeoutMs: req.timeoutMs,
      });
      return {
        status: enumOf<ToolInvokeStatus>('TOOL_INVOKE_STATUS', outcome.status),
        toolCallId: outcome.toolCallId,
        result: outcome.status === 'succeeded' ? outcome.result : undefined,
        reason: outcome.status === 'pending' ? outcome.reason : '',
        error: outcome.status === 'failed' ? toolError(outcome.error) : undefined,
      };
    },
    async getToolCall(req, ctx) {
      return { toolCall: toToolCallMessage(await calls.visible(ctx.principal, req.toolCallId)) };
    },
    async waitToolCall(req, ctx) {
      const timeoutMs = req.timeoutMs ?? defaultTimeoutMs;
      if (timeoutMs < 0 || timeoutMs > 600_000) throw invalidRequest('timeout_ms must be 0-600000', 'timeout_ms');
      const call = await calls.visible(ctx.principal, req.toolCallId);
      return { toolCall: toToolCallMessage(await calls.wait(call, timeoutMs, ctx.signal)) };
    },
    async putSecret(req, ctx) {
      const { tenantId } = requireKey(ctx.principal);
      return { secret: toSecretInfo(await calls.secrets.put(tenantId, req.name, req.value)) };
    },
    async listSecrets(_req, ctx) {
      const { tenantId } = requireKey(ctx.principal);
      return { secrets: (await calls.secrets.list(tenantId)).map(toSecretInfo) };
    },
    async putPolicy(req, ctx) {
      const tenantId = targetTenant(requireKey(ctx.principal), req.platform);
      if (!req.policy) throw invalidRequest('policy is required', 'policy');
      const stored = await calls.policy.put(tenantId, req.policy);
      return { version: stored.version, createdAt: millis(stored.createdAt) };
    },
    async getPolicy(req, ctx) {
      const tenantId = targetTenant(requireKey(ctx.principal), req.platform, 'operator');
      const { document, source } = calls.policy.describe(req.platform ? 'platform' : 'tenant', tenantId);
      return { policy: document as unknown as Record<string, unknown> | undefined, source, scope: req.platform ? 'platform' : 'tenant' };
    },
    async submitToolResult(req, ctx) {
      const principal = requireKey(ctx.principal);
      const user = String(ctx.metadata.get('x-user-id')[0] ?? '') || null;
      const call = await calls.submitResult(principal, user, { toolCallId: req.toolCallId, ok: req.ok, result: req.result, errorMessage: req.errorMessage });
      return { toolCall: toToolCallMessage(call) };
    },
  };
}

export function approvalHandlers(calls: ToolCalls): ServiceHandlers<typeof ApprovalServiceService> {
  return {
    async listApprovals(req, ctx) {
      if (!ctx.principal) throw unauthenticated();
      const status = req.status === ApprovalStatus.APPROVAL_STATUS_UNSPECIFIED ? undefined : (req.status.replace(/^APPROVAL_STATUS_/, '') as ApprovalState);
      const filter = { sessionId: req.sessionId || undefined, runId: req.runId || undefined, ticket: req.ticket || undefined, status };
      const page = await calls.listApprovals(ctx.principal, filter, { limit: pageLimit(req.limit, 100, 1000), cursor: req.cursor });
      return { approvals: page.approvals.map(toApprovalMessage), hasMore: page.hasMore, nextCursor: page.nextCursor };
    },
    async decideApproval(req, ctx) {
      const principal = requireKey(ctx.principal);
      if (req.decision === Decision.DECISION_UNSPECIFIED) throw invalidRequest('decision must be approve or reject', 'decision');
      const userId = String(ctx.metadata.get('x-user-id')[0] ?? '') || defaultUser(principal);
      const approval = await calls.decide(req.approvalId, req.decision === Decision.DECISION_APPROVE ? 'approve' : 'reject', principal, userId, req.reason);
      return { approval: toApprovalMessage(approval) };
    },
  };
}
