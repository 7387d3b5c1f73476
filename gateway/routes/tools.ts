// Tools, tool calls and approvals (seed 001 §7.2, §4.5).
import type { FastifyInstance } from 'fastify';
import { Decision, type Approval } from '../../gen/abc/orchestrator/v1/approval.js';
import { ApprovalStatus } from '../../gen/abc/orchestrator/v1/approval.js';
import { PermissionLevel, ToolKind, type Tool, type ToolCall } from '../../gen/abc/orchestrator/v1/tool.js';
import type { CoreClients } from '../core-client.js';
import { call, metadataOf } from '../grpc-call.js';
import { platformQuery } from '../boundary.js';
import { plainEnum } from '../mappers.js';

const KIND: Record<string, ToolKind> = { builtin: ToolKind.TOOL_KIND_SERVER_BUILTIN, http: ToolKind.TOOL_KIND_SERVER_HTTP, client: ToolKind.TOOL_KIND_CLIENT };
const KIND_NAME: Partial<Record<ToolKind, string>> = Object.fromEntries(Object.entries(KIND).map(([k, v]) => [v, k]));

const toolJson = (t: Tool) => ({
  name: t.name,
  kind: KIND_NAME[t.kind] ?? 'unknown',
  version: t.version,
  description: t.description || null,
  input_schema: t.inputSchema ?? null,
  output_schema: t.outputSchema ?? null,
  timeout_ms: t.timeoutMs,
  permission_level: plainEnum(t.permissionLevel, 'PERMISSION_LEVEL'),
  side_effect: t.sideEffect,
  endpoint: t.endpoint || null,
});

/** GET /v1/tool_calls/{id} (seed 001 §7.2). */
export const toolCallJson = (c: ToolCall) => ({
  tool_call_id: c.toolCallId,
  run_id: c.runId,
  tool_name: c.toolName,
  status: plainEnum(c.status, 'TOOL_CALL_STATUS').toLowerCase(),
  args: c.args ?? {},
  result: c.result ?? null,
  error: c.error ? { code: c.error.code, message: c.error.message, retryable: c.error.retryable } : null,
  approval_id: c.approvalId || null,
  idempotency_key: c.idempotencyKey || null,
  timestamps: { created_at: c.timestamps?.createdAt ?? 0, started_at: c.timestamps?.startedAt || null, completed_at: c.timestamps?.completedAt || null },
  deadline_ts: c.deadlineTs || null,
});

const approvalJson = (a: Approval) => ({
  approval_id: a.approvalId,
  run_id: a.runId || null,
  session_id: a.sessionId,
  tool_call_id: a.toolCallId || null,
  ticket: a.ticket || null,
  step_id: a.stepId || null,
  tool_name: a.toolName,
  args_summary: a.argsSummary,
  status: plainEnum(a.status, 'APPROVAL_STATUS'),
  created_at: a.createdAt,
  expires_at: a.expiresAt,
  decided_at: a.decidedAt || null,
  decided_by: a.decidedBy || null,
  reason: a.reason || null,
});

const idParam = (name: string) => ({ type: 'object', required: [name], properties: { [name]: { type: 'string', minLength: 1, maxLength: 128 } } }) as const;

export function toolRoutes(app: FastifyInstance, core: CoreClients): void {
  // Secrets are write-only: a value goes in, and only names and versions come out.
  const secretJson = (x: { name: string; version: number; createdAt: number; retiresAt: number }) => ({
    name: x.name, version: x.version, created_at: x.createdAt, retires_at: x.retiresAt || null,
  });
  app.put<{ Params: { name: string }; Body: { value: string } }>(
    '/v1/secrets/:name',
    {
      schema: {
        params: { type: 'object', required: ['name'], properties: { name: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,128}$' } } },
        body: { type: 'object', additionalProperties: false, required: ['value'], properties: { value: { type: 'string', minLength: 1, maxLength: 16384 } } },
      },
    },
    async (req) => ({ secret: secretJson((await call(core.tools.putSecret.bind(core.tools), { name: req.params.name, value: req.body.value }, req)).secret!) }),
  );
  // The platform policy: the document in force, and a new version stored over the API.
  app.get<{ Querystring: { platform?: boolean } }>('/v1/policy', { schema: { querystring: platformQuery } }, async (req) => {
    const res = await call(core.tools.getPolicy.bind(core.tools), { platform: req.query.platform ?? false }, req);
    return { policy: res.policy ?? null, source: res.source, scope: res.scope };
  });
  app.put<{ Body: Record<string, unknown>; Querystring: { platform?: boolean } }>('/v1/policy', { schema: { body: { type: 'object' }, querystring: platformQuery } }, async (req) => {
    const res = await call(core.tools.putPolicy.bind(core.tools), { policy: req.body, platform: req.query.platform ?? false }, req);
    return { version: res.version, created_at: res.createdAt };
  });
  app.get('/v1/secrets', async (req) => ({ secrets: (await call(core.tools.listSecrets.bind(core.tools), {}, req)).secrets.map(secretJson) }));

  app.post<{ Body: Record<string, any> }>(
    '/v1/tools/register',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['name', 'kind'],
          properties: {
            name: { type: 'string', minLength: 1, maxLength: 128 },
            kind: { enum: ['builtin', 'http', 'client'] },
            version: { type: 'string', maxLength: 32 },
            description: { type: 'string' },
            input_schema: { type: 'object' },
            output_schema: { type: 'object' },
            timeout_ms: { type: 'integer', minimum: 1 },
            permission_level: { enum: ['PUBLIC', 'INTERNAL', 'ADMIN'] },
            side_effect: { type: 'boolean' },
            endpoint: { type: 'string' },
            metadata: { type: 'object' },
          },
        },
      },
    },
    async (req) => {
      const b = req.body;
      const res = await call(
        core.tools.registerTool.bind(core.tools),
        {
          tool: {
            name: b.name,
            kind: KIND[b.kind]!,
            version: b.version ?? '',
            description: b.description ?? '',
            inputSchema: b.input_schema,
            outputSchema: b.output_schema,
            timeoutMs: b.timeout_ms ?? 0,
            permissionLevel: (b.permission_level ? `PERMISSION_LEVEL_${b.permission_level}` : PermissionLevel.PERMISSION_LEVEL_UNSPECIFIED) as PermissionLevel,
            sideEffect: b.side_effect ?? false,
            endpoint: b.endpoint ?? '',
            policy: undefined,
            metadata: b.metadata,
          },
        },
        req,
      );
      return { tool: toolJson(res.tool!) };
    },
  );

  app.get('/v1/tools', async (req) => ({ tools: (await call(core.tools.listTools.bind(core.tools), {}, req)).tools.map(toolJson) }));

  app.post<{ Params: { name: string }; Body: { run_id: string; args?: Record<string, unknown>; idempotency_key?: string; timeout_ms?: number } }>(
    '/v1/tools/:name(^[^:]+)::invoke',
    {
      schema: {
        params: idParam('name'),
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['run_id'],
          properties: {
            run_id: { type: 'string', minLength: 1, maxLength: 64 },
            args: { type: 'object' },
            idempotency_key: { type: 'string', minLength: 1, maxLength: 256 },
            timeout_ms: { type: 'integer', minimum: 1, maximum: 3_600_000 },
          },
        },
      },
    },
    async (req) => {
      const b = req.body;
      const res = await call(
        core.tools.invokeTool.bind(core.tools),
        { toolName: req.params.name, runId: b.run_id, args: b.args ?? {}, idempotencyKey: b.idempotency_key ?? '', timeoutMs: b.timeout_ms },
        req,
      );
      const status = plainEnum(res.status, 'TOOL_INVOKE_STATUS').toLowerCase();
      if (status === 'succeeded') return { status, tool_call_id: res.toolCallId, result: res.result ?? null };
      if (status === 'pending') return { status, tool_call_id: res.toolCallId, reason: res.reason };
      return { status, tool_call_id: res.toolCallId, error: { code: res.error?.code ?? 'tool_failed', message: res.error?.message ?? '', retryable: res.error?.retryable ?? false } };
    },
  );

  app.get<{ Params: { id: string } }>('/v1/tool_calls/:id', { schema: { params: idParam('id') } }, async (req) => {
    return toolCallJson((await call(core.tools.getToolCall.bind(core.tools), { toolCallId: req.params.id }, req)).toolCall!);
  });

  app.post<{ Params: { id: string }; Querystring: { timeout_ms: number } }>(
    '/v1/tool_calls/:id(^[^:]+)::wait',
    {
      schema: {
        params: idParam('id'),
        querystring: { type: 'object', additionalProperties: false, properties: { timeout_ms: { type: 'integer', minimum: 0, maximum: 600_000, default: 60_000 } } },
      },
    },
    async (req) => toolCallJson((await call(core.tools.waitToolCall.bind(core.tools), { toolCallId: req.params.id, timeoutMs: req.query.timeout_ms }, req)).toolCall!),
  );

  app.get<{ Querystring: { session_id?: string; run_id?: string; ticket?: string; status?: string; limit?: number; cursor?: string } }>(
    '/v1/approvals',
    {
      schema: {
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            session_id: { type: 'string' },
            run_id: { type: 'string' },
            ticket: { type: 'string' },
            status: { enum: ['PENDING', 'APPROVED', 'REJECTED', 'EXPIRED'] },
            limit: { type: 'integer', minimum: 1, maximum: 1000 },
            cursor: { type: 'string', maxLength: 100 },
          },
        },
      },
    },
    async (req) => {
      const q = req.query;
      const status = (q.status ? `APPROVAL_STATUS_${q.status}` : ApprovalStatus.APPROVAL_STATUS_UNSPECIFIED) as ApprovalStatus;
      const res = await call(
        core.approvals.listApprovals.bind(core.approvals),
        { sessionId: q.session_id ?? '', runId: q.run_id ?? '', ticket: q.ticket ?? '', status, limit: q.limit ?? 0, cursor: q.cursor ?? '' },
        req,
      );
      return { approvals: res.approvals.map(approvalJson), has_more: res.hasMore, next_cursor: res.nextCursor || null };
    },
  );

  // The deciding user is named by `x-user-id`; the API key authenticates the application.
  app.post<{ Params: { id: string }; Body: { decision: 'approve' | 'reject'; reason?: string } }>(
    '/v1/approvals/:id(^[^:]+)::decide',
    {
      schema: {
        params: idParam('id'),
        body: { type: 'object', additionalProperties: false, required: ['decision'], properties: { decision: { enum: ['approve', 'reject'] }, reason: { type: 'string', maxLength: 2000 } } },
      },
    },
    async (req) => {
      const metadata = metadataOf(req);
      const user = req.headers['x-user-id'];
      if (typeof user === 'string') metadata.set('x-user-id', user);
      const res = await new Promise<{ approval?: Approval }>((resolve, reject) =>
        core.approvals.decideApproval(
          { approvalId: req.params.id, decision: req.body.decision === 'approve' ? Decision.DECISION_APPROVE : Decision.DECISION_REJECT, reason: req.body.reason ?? '' },
          metadata,
          (error, r) => (error ? reject(error) : resolve(r)),
        ),
      );
      return { approval: approvalJson(res.approval!) };
    },
  );
}
