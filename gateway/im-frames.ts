// IM frames: JSON (seed 001 §5) <-> IngressService.Connect messages.
// Client frames are validated with ajv; an invalid one names its field.
import { Ajv, type ErrorObject } from 'ajv';
import { jsonProblem } from './boundary.js';
import { ApprovalVerdict } from '../gen/abc/ingress/v1/im.js';
import { ConnectRequest, type ConnectResponse } from '../gen/abc/ingress/v1/ingress.js';

const common = {
  type: { type: 'string' },
  ts: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
  request_id: { type: 'string', maxLength: 128 },
  session_id: { type: 'string', minLength: 1, maxLength: 64 },
  run_id: { type: 'string', maxLength: 64 },
} as const;

const frame = (required: string[], properties: Record<string, unknown>) => ({
  type: 'object',
  additionalProperties: false,
  required: ['type', ...required],
  properties: { ...common, ...properties },
});

/** One JSON Schema per client frame type. */
export const CLIENT_FRAME_SCHEMAS = {
  hello: frame(['api_key'], {
    api_key: { type: 'string', minLength: 1, maxLength: 256 },
    user_id: { type: 'string', minLength: 1, maxLength: 64 },
    client_meta: { type: 'object' },
    exclude_events: { type: 'array', maxItems: 50, items: { type: 'string', maxLength: 64 } },
    traceparent: { type: 'string', pattern: '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$' },
  }),
  agent_invoke: frame(['agent_id', 'message'], {
    agent_id: { type: 'string', minLength: 1, maxLength: 64 },
    message: {
      type: 'object',
      additionalProperties: false,
      required: ['role', 'content'],
      properties: { role: { const: 'user' }, content: { type: 'string', minLength: 1, maxLength: 1_000_000 } },
    },
    context: { type: 'object' },
  }),
  tool_result: frame(['tool_call_id', 'ok'], { tool_call_id: { type: 'string', minLength: 1, maxLength: 128 }, ok: { type: 'boolean' }, result: {}, error_message: { type: 'string', maxLength: 10_000 } }),
  approval_decision: frame(['approval_id', 'decision'], {
    approval_id: { type: 'string', minLength: 1, maxLength: 128 },
    decision: { enum: ['approve', 'reject'] },
    reason: { type: 'string', maxLength: 2000 },
  }),
  cancel_run: frame(['run_id'], {}),
  resume: frame(['session_id', 'cursor'], { cursor: { type: 'string', pattern: '^[0-9]{0,19}$' } }),
} as const;

type ClientType = keyof typeof CLIENT_FRAME_SCHEMAS;

const ajv = new Ajv({ allErrors: false, strict: true });
const validators = Object.fromEntries(Object.entries(CLIENT_FRAME_SCHEMAS).map(([type, schema]) => [type, ajv.compile(schema)])) as Record<
  ClientType,
  ReturnType<typeof ajv.compile>
>;

export type Parsed = { ok: true; request: ConnectRequest } | { ok: false; field: string; message: string; requestId?: string; sessionId?: string };

/** Parses one WebSocket text message into a Connect request, or says which field is wrong. */
export function parseClientFrame(text: string): Parsed {
  let json: Record<string, unknown>;
  try {
    const value: unknown = JSON.parse(text);
    if (!value || typeof value !== 'object' || Array.isArray(value)) return { ok: false, field: '', message: 'a frame must be a JSON object' };
    json = value as Record<string, unknown>;
  } catch {
    return { ok: false, field: '', message: 'a frame must be valid JSON' };
  }
  const problem = jsonProblem(json);
  if (problem) return { ok: false, ...problem };
  const ids = { requestId: typeof json.request_id === 'string' ? json.request_id : undefined, sessionId: typeof json.session_id === 'string' ? json.session_id : undefined };
  const type = json.type;
  if (typeof type !== 'string' || !(type in validators)) {
    return { ok: false, field: 'type', message: `type must be one of ${Object.keys(validators).join(', ')}`, ...ids };
  }
  const validate = validators[type as ClientType];
  if (!validate(json)) {
    const error = validate.errors![0]!;
    return { ok: false, field: fieldOf(error), message: `${fieldOf(error) || 'frame'} ${error.message}`, ...ids };
  }
  return { ok: true, request: toRequest(type as ClientType, json) };
}

function fieldOf(error: ErrorObject): string {
  const path = error.instancePath.replace(/^\//, '').replaceAll('/', '.');
  const extra = (error.params as { missingProperty?: string; additionalProperty?: string }).missingProperty ?? (error.params as { additionalProperty?: string }).additionalProperty;
  return [path, extra].filter(Boolean).join('.');
}

function toRequest(type: ClientType, j: Record<string, any>): ConnectRequest {
  const base = { ts: j.ts ?? Date.now(), requestId: j.request_id ?? '', sessionId: j.session_id ?? '', runId: j.run_id ?? '' };
  switch (type) {
    case 'hello':
      return ConnectRequest.fromPartial({ ...base, frame: { $case: 'hello', value: { apiKey: j.api_key, userId: j.user_id ?? '', clientMeta: j.client_meta, excludeEvents: j.exclude_events ?? [], traceparent: j.traceparent ?? '', batchFrames: true } } });
    case 'agent_invoke':
      return ConnectRequest.fromPartial({ ...base, frame: { $case: 'agentInvoke', value: { agentId: j.agent_id, message: j.message, context: j.context } } });
    case 'tool_result':
      return ConnectRequest.fromPartial({
        ...base,
        frame: { $case: 'toolResult', value: { toolCallId: j.tool_call_id, ok: j.ok, result: j.result, errorMessage: j.error_message ?? '' } },
      });
    case 'approval_decision':
      return ConnectRequest.fromPartial({
        ...base,
        frame: {
          $case: 'approvalDecision',
          value: {
            approvalId: j.approval_id,
            decision: j.decision === 'approve' ? ApprovalVerdict.APPROVAL_VERDICT_APPROVE : ApprovalVerdict.APPROVAL_VERDICT_REJECT,
            reason: j.reason ?? '',
          },
        },
      });
    case 'cancel_run':
      return ConnectRequest.fromPartial({ ...base, frame: { $case: 'cancelRun', value: {} } });
    case 'resume':
      return ConnectRequest.fromPartial({ ...base, frame: { $case: 'resume', value: { cursor: j.cursor } } });
  }
}

/** A server frame as the JSON of seed 001 §5.3, with `cursor` for resume. */
export function serverFrameJson(res: ConnectResponse): Record<string, unknown> {
  const head = {
    ts: res.ts,
    ...(res.requestId && { request_id: res.requestId }),
    ...(res.sessionId && { session_id: res.sessionId }),
    ...(res.runId && { run_id: res.runId }),
    ...(res.cursor && { cursor: res.cursor }),
  };
  const f = res.frame;
  switch (f?.$case) {
    case 'helloAck':
      return { type: 'hello_ack', ...head, user_id: f.value.userId, connection_id: f.value.connectionId };
    case 'runStarted':
      return { type: 'run_started', ...head, agent_id: f.value.agentId, ...(f.value.traceId && { trace_id: f.value.traceId }) };
    case 'delta':
      return { type: 'delta', ...head, text: f.value.text };
    case 'state':
      return { type: 'state', ...head, state: f.value.state, detail: f.value.detail ?? {} };
    case 'toolRequest':
      return { type: 'tool_request', ...head, tool_call_id: f.value.toolCallId, tool_name: f.value.toolName, args: f.value.args ?? {}, deadline_ts: f.value.deadlineTs };
    case 'approvalRequired':
      return {
        type: 'approval_required',
        ...head,
        approval_id: f.value.approvalId,
        tool_call_id: f.value.toolCallId,
        tool_name: f.value.toolName,
        args_summary: f.value.argsSummary,
        expires_at: f.value.expiresAt,
      };
    case 'error':
      return { type: 'error', ...head, code: f.value.code, message: f.value.message, ...(f.value.field && { field: f.value.field }), retryable: f.value.retryable };
    case 'done': {
      const u = f.value.usage;
      return {
        type: 'done',
        ...head,
        usage: { total_tokens: u?.totalTokens ?? 0, prompt_tokens: u?.promptTokens ?? 0, completion_tokens: u?.completionTokens ?? 0, duration_ms: u?.durationMs ?? 0 },
        ...(f.value.finalMessage && { final_message: f.value.finalMessage }),
        ...(f.value.detail && Object.keys(f.value.detail).length > 0 && { detail: f.value.detail }),
      };
    }
    default:
      return { type: 'error', ...head, code: 'internal_error', message: 'unknown server frame', retryable: false };
  }
}
