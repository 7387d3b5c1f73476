// Every failure the engine meets becomes a StructuredError. A tool may say what
// it wants (`{error: {code, severity, retryable, suggested_action}}`); otherwise
// the category decides: compliance and bad input halt, timeouts retry, broken
// output replans.
import { AbcError } from '../domain/errors.js';
import { structuredError, type StructuredError, type SuggestedAction } from '../domain/engine-types.js';

const ACTIONS: readonly SuggestedAction[] = ['RETRY', 'REPLAN', 'ROLLBACK', 'HALT'];

export function toStructured(thrown: unknown, metadata: Record<string, unknown> = {}): StructuredError {
  const e = AbcError.from(thrown).payload;
  const own = (e.details?.tool_error ?? {}) as Record<string, unknown>;
  const { tool_error: _, ...details } = e.details ?? {};
  const meta = { category: e.category, ...details, ...metadata, ...(own.metadata as Record<string, unknown> | undefined) };
  const suggested = ACTIONS.includes(own.suggested_action as SuggestedAction) ? (own.suggested_action as SuggestedAction) : defaultAction(e.category, e.retryable);
  const severity = own.severity === 'INFO' || own.severity === 'WARNING' || own.severity === 'CRITICAL' ? own.severity : e.category === 'COMPLIANCE' ? 'CRITICAL' : 'WARNING';
  return structuredError(typeof own.code === 'string' ? own.code : e.code, typeof own.message === 'string' ? own.message : e.message, {
    severity,
    retryable: typeof own.retryable === 'boolean' ? own.retryable : e.retryable,
    suggested_action: suggested,
    metadata: meta,
  });
}

function defaultAction(category: string, retryable: boolean): SuggestedAction {
  if (category === 'COMPLIANCE' || category === 'VALIDATION' || category === 'AUTH') return 'HALT';
  // A missing record stays missing whatever the plan.
  if (category === 'DATA_SOURCE' && !retryable) return 'HALT';
  return retryable ? 'RETRY' : 'REPLAN';
}
