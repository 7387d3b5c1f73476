// The one shape in which ABC stores an error (runs, tool calls, tickets) and
// answers it: the seed error shape. Rows written before it had other shapes;
// storedError() reads all of them, so every surface maps one shape to the wire.
import type { StructuredError } from './engine-types.js';
import { ERROR_CATEGORIES, type ErrorCategory } from './errors.js';

export interface StoredError {
  code: string;
  category: ErrorCategory;
  message: string;
  retryable: boolean;
  retry_after_seconds?: number;
  details?: Record<string, unknown>;
  trace_id?: string;
}

/** Codes that are worth retrying when the stored error does not say. */
const RETRYABLE = new Set(['tool_timeout', 'client_offline', 'database_unavailable', 'conflict']);

/** A stored error in the one shape, from any shape ABC ever stored. */
export function storedError(raw: Record<string, unknown>): StoredError {
  const { code, category, message, retryable, retry_after_seconds, details, trace_id, ...rest } = raw;
  const codeText = String(code ?? 'internal_error');
  const extra = { ...(details as Record<string, unknown> | undefined), ...rest };
  return {
    code: codeText,
    category: (ERROR_CATEGORIES as readonly unknown[]).includes(category) ? (category as ErrorCategory) : codeText === 'internal_error' ? 'INTERNAL' : 'EXECUTION',
    message: String(message ?? ''),
    retryable: typeof retryable === 'boolean' ? retryable : RETRYABLE.has(codeText),
    ...(typeof retry_after_seconds === 'number' && { retry_after_seconds }),
    ...(Object.keys(extra).length > 0 && { details: extra }),
    ...(typeof trace_id === 'string' && trace_id && { trace_id }),
  };
}

/** The error a halted execution stores: the StructuredError that stopped it, with its severity and the policy's reason. */
export function haltError(error: StructuredError, traceId: string, reason?: string): StoredError {
  const { category, ...details } = error.metadata as { category?: unknown };
  return {
    code: error.code,
    category: (ERROR_CATEGORIES as readonly unknown[]).includes(category) ? (category as ErrorCategory) : 'EXECUTION',
    message: error.message,
    retryable: error.retryable,
    details: { ...details, severity: error.severity, ...(reason && { halt_reason: reason }) },
    trace_id: traceId,
  };
}
