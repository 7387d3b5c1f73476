// Runs one server tool (built-in or HTTP webhook) within its timeout, and
// checks the result against the tool's output schema. It knows nothing of
// policy, runs or approvals: the orchestrator decides whether it runs at all.
import { Ajv, type ValidateFunction } from 'ajv';
import type { ToolRow } from '../domain/tool.js';
import { BUILTIN_TOOLS } from './builtin-tools.js';

export type ToolFailureCode = 'tool_failed' | 'tool_timeout' | 'invalid_output' | 'invalid_args';

export class ToolFailure extends Error {
  constructor(
    readonly code: ToolFailureCode,
    message: string,
    options?: { cause?: unknown; detail?: Record<string, unknown> },
  ) {
    super(message, options);
    /** The tool's own error object (`{error: {...}}` in a non-2xx JSON answer), if it sent one. */
    this.detail = options?.detail;
    this.name = 'ToolFailure';
  }

  readonly detail: Record<string, unknown> | undefined;
}

const ajv = new Ajv({ strict: false, allErrors: false, useDefaults: true });
const compiled = new Map<string, ValidateFunction>();

/** Validates `value` against `schema` (cached by content); returns the first problem, or null. */
export function schemaProblem(schema: Record<string, unknown> | null, value: unknown): { field: string; message: string } | null {
  if (!schema) return null;
  const key = JSON.stringify(schema);
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(key, validate);
  }
  if (validate(value)) return null;
  const e = validate.errors![0]!;
  const field = [e.instancePath.replace(/^\//, '').replaceAll('/', '.'), (e.params as { missingProperty?: string }).missingProperty].filter(Boolean).join('.');
  return { field, message: `${field || 'value'} ${e.message}` };
}

export interface RunRequest {
  tool: ToolRow;
  args: Record<string, unknown>;
  toolCallId: string;
  runId: string;
  timeoutMs: number;
  signal: AbortSignal;
}

export async function runServerTool(req: RunRequest): Promise<unknown> {
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(), req.timeoutMs);
  const signal = AbortSignal.any([req.signal, timeout.signal]);
  let result: unknown;
  try {
    result = await (req.tool.kind === 'builtin' ? runBuiltin(req, signal) : runWebhook(req, signal));
  } catch (error) {
    if (timeout.signal.aborted) throw new ToolFailure('tool_timeout', `${req.tool.name} did not finish within ${req.timeoutMs} ms`);
    if (error instanceof ToolFailure) throw error;
    throw new ToolFailure('tool_failed', `${req.tool.name} failed: ${(error as Error).message}`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
  const problem = schemaProblem(req.tool.outputSchema, result);
  if (problem) throw new ToolFailure('invalid_output', `${req.tool.name} returned output that breaks its schema: ${problem.message}`);
  return result;
}

async function runBuiltin(req: RunRequest, signal: AbortSignal): Promise<unknown> {
  const builtin = BUILTIN_TOOLS.find((b) => b.name === req.tool.name);
  if (!builtin) throw new ToolFailure('tool_failed', `no built-in tool ${req.tool.name}`);
  return Promise.race([
    builtin.execute(req.args, signal),
    new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true })),
  ]);
}

/** POST {endpoint} with `{tool, args, tool_call_id, run_id}`; a 2xx JSON body is the result. */
async function runWebhook(req: RunRequest, signal: AbortSignal): Promise<unknown> {
  const res = await fetch(req.tool.endpoint!, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': req.toolCallId, 'x-tool-call-id': req.toolCallId, 'x-run-id': req.runId },
    body: JSON.stringify({ tool: req.tool.name, args: req.args, tool_call_id: req.toolCallId, run_id: req.runId }),
    signal,
  });
  const text = await res.text();
  if (!res.ok) throw new ToolFailure('tool_failed', `${req.tool.name} answered HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ''}`, { detail: errorObject(text) });
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    throw new ToolFailure('invalid_output', `${req.tool.name} answered a body that is not JSON`);
  }
}

/** `{error: {...}}` from a failed webhook's JSON body, if that is what it sent. */
function errorObject(text: string): Record<string, unknown> | undefined {
  try {
    const body = JSON.parse(text) as { error?: unknown };
    return body?.error && typeof body.error === 'object' && !Array.isArray(body.error) ? (body.error as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
