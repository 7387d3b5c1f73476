// Runs one server-side tool call on its kind's adapter within its timeout, and
// checks the result against the tool's output schema. It knows nothing of
// policy, runs or approvals: the orchestrator decides whether it runs at all.
import { Ajv, type ValidateFunction } from 'ajv';
import type { ToolRow } from '../domain/tool.js';
import { ToolFailure } from './tool-failure.js';
import type { ToolKinds } from './tool-kinds.js';

export { ToolFailure, type ToolFailureCode } from './tool-failure.js';

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
  /** Aborts the call (a cancel); the timeout aborts it regardless. */
  signal?: AbortSignal;
  /** Resolves the secrets the tool's definition names, in the caller's tenant. */
  secret(ref: string): Promise<string>;
  /** The W3C traceparent the tool's request carries. */
  traceparent?: string;
}

export async function runServerTool(kinds: ToolKinds, req: RunRequest): Promise<unknown> {
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(), req.timeoutMs);
  const signal = req.signal ? AbortSignal.any([req.signal, timeout.signal]) : timeout.signal;
  let result: unknown;
  try {
    const adapter = kinds.get(req.tool.kind);
    if (!adapter.run) throw new ToolFailure('tool_failed', `${req.tool.name} is a ${adapter.kind} tool: it runs on the client`);
    result = await adapter.run({ tool: req.tool, args: req.args, toolCallId: req.toolCallId, runId: req.runId, signal, secret: req.secret, traceparent: req.traceparent });
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
