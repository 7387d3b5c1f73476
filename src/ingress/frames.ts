// Event log -> IM server frames (seed 001 §5.3). Events with no frame are not sent.
import type { ConnectResponse } from '../../gen/abc/ingress/v1/ingress.js';
import type { StoredEvent } from '../store/event-log.js';

type Frame = NonNullable<ConnectResponse['frame']>;

export function frameOf(event: StoredEvent): ConnectResponse | null {
  const p = event.payload;
  const str = (v: unknown) => (typeof v === 'string' ? v : '');
  const num = (v: unknown) => (typeof v === 'number' ? v : 0);
  let frame: Frame | null = null;
  let requestId = '';
  switch (event.type) {
    case 'run_started':
      frame = { $case: 'runStarted', value: { agentId: str(p.agent_id), traceId: str(p.trace_id) } };
      requestId = str(p.request_id);
      break;
    case 'agent_stream_delta':
      frame = { $case: 'delta', value: { text: str(p.text) } };
      break;
    case 'agent_state':
      frame = { $case: 'state', value: { state: str(p.state), detail: (p.detail as Record<string, unknown>) ?? {} } };
      break;
    case 'run_state':
      frame = { $case: 'state', value: { state: str(p.to), detail: (p.detail as Record<string, unknown>) ?? {} } };
      break;
    case 'execution_state':
      // Seed 004: an execution contract moved; the detail carries the seed's fields.
      frame = { $case: 'state', value: { state: 'execution_state', detail: { execution_state: p } } };
      break;
    case 'approval_created':
      frame = {
        $case: 'approvalRequired',
        value: { approvalId: str(p.approval_id), toolCallId: str(p.tool_call_id), toolName: str(p.tool_name), argsSummary: str(p.args_summary), expiresAt: num(p.expires_at) },
      };
      break;
    case 'tool_request':
      frame = {
        $case: 'toolRequest',
        value: { toolCallId: str(p.tool_call_id), toolName: str(p.tool_name), args: (p.args as Record<string, unknown>) ?? {}, deadlineTs: num(p.deadline_ts) },
      };
      break;
    case 'tool_result': {
      // An expired approval, a client tool past its deadline, or one no client was
      // connected to run (seed 001 §5.3, delivered on resume), is news to the client;
      // other results reach the agent only.
      const error = (p.error ?? {}) as Record<string, unknown>;
      const code = error.code === 'approval_timeout' || (p.kind === 'client' && (error.code === 'tool_timeout' || error.code === 'client_offline')) ? String(error.code) : null;
      if (!code) break;
      frame = { $case: 'error', value: { code, message: str(error.message), field: '', retryable: code !== 'approval_timeout' } };
      break;
    }
    case 'run_cancelled':
      frame = { $case: 'state', value: { state: 'CANCELLED', detail: { reason: p.reason ?? null } } };
      break;
    case 'run_done': {
      const usage = (p.usage ?? {}) as Record<string, unknown>;
      frame = {
        $case: 'done',
        value: {
          usage: {
            promptTokens: num(usage.prompt_tokens),
            completionTokens: num(usage.completion_tokens),
            totalTokens: num(usage.total_tokens),
            durationMs: num(usage.duration_ms),
          },
          finalMessage: str(p.final_message),
          detail: p.detail as Record<string, unknown> | undefined,
        },
      };
      break;
    }
    case 'run_failed': {
      const error = (p.error ?? {}) as Record<string, unknown>;
      frame = { $case: 'error', value: { code: str(error.code) || 'internal_error', message: str(error.message), field: '', retryable: Boolean(error.retryable) } };
      break;
    }
  }
  if (!frame) return null;
  return { ts: event.ts, requestId, sessionId: event.sessionId, runId: event.runId, cursor: event.id, frame };
}
