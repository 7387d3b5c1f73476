// The one error type of the core. Each code mirrors a gRPC status; the payload
// follows the seed error shape (code, category, retryable, retry_after_seconds).
// Pure: no I/O, no generated code.

/** gRPC status codes, by name. */
export const Status = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;
export type StatusName = keyof typeof Status;

export const ERROR_CATEGORIES = ['VALIDATION', 'AUTH', 'DATA_SOURCE', 'EXECUTION', 'TIMEOUT', 'COMPLIANCE', 'INTERNAL'] as const;
export type ErrorCategory = (typeof ERROR_CATEGORIES)[number];

export interface ErrorPayload {
  /** Stable machine code, e.g. `invalid_request`, `agent_error`, `IDEMPOTENCY_CONFLICT`. */
  code: string;
  category: ErrorCategory;
  message: string;
  retryable: boolean;
  retryAfterSeconds?: number;
  details?: Record<string, unknown>;
  traceId?: string;
}

const DEFAULT_CATEGORY: Record<StatusName, ErrorCategory> = {
  OK: 'INTERNAL',
  CANCELLED: 'EXECUTION',
  UNKNOWN: 'INTERNAL',
  INVALID_ARGUMENT: 'VALIDATION',
  DEADLINE_EXCEEDED: 'TIMEOUT',
  NOT_FOUND: 'VALIDATION',
  ALREADY_EXISTS: 'VALIDATION',
  PERMISSION_DENIED: 'AUTH',
  RESOURCE_EXHAUSTED: 'EXECUTION',
  FAILED_PRECONDITION: 'EXECUTION',
  ABORTED: 'EXECUTION',
  OUT_OF_RANGE: 'VALIDATION',
  UNIMPLEMENTED: 'INTERNAL',
  INTERNAL: 'INTERNAL',
  UNAVAILABLE: 'EXECUTION',
  DATA_LOSS: 'INTERNAL',
  UNAUTHENTICATED: 'AUTH',
};

const RETRYABLE: ReadonlySet<StatusName> = new Set(['UNAVAILABLE', 'DEADLINE_EXCEEDED', 'RESOURCE_EXHAUSTED', 'ABORTED', 'INTERNAL']);

/** The only error that reaches a client; anything else becomes a safe `internal_error`. */
export class AbcError extends Error {
  readonly status: StatusName;
  readonly payload: ErrorPayload;

  constructor(status: StatusName, payload: Partial<ErrorPayload> & { code: string; message: string }, options?: { cause?: unknown }) {
    super(payload.message, options);
    this.name = 'AbcError';
    this.status = status;
    this.payload = {
      category: DEFAULT_CATEGORY[status],
      retryable: RETRYABLE.has(status),
      ...payload,
    };
  }

  /** Turns anything thrown into an AbcError, keeping the original as `cause` for logs only. */
  static from(thrown: unknown): AbcError {
    if (thrown instanceof AbcError) return thrown;
    return new AbcError('INTERNAL', { code: 'internal_error', message: 'internal error' }, { cause: thrown });
  }
}

export const invalidRequest = (message: string, field?: string) =>
  new AbcError('INVALID_ARGUMENT', { code: 'invalid_request', message, details: field ? { field } : undefined });

export const notFound = (what: string, id: string) =>
  new AbcError('NOT_FOUND', { code: 'not_found', message: `${what} ${id} not found`, details: { [what]: id } });

export const unauthenticated = (message = 'a valid API key is required') =>
  new AbcError('UNAUTHENTICATED', { code: 'unauthenticated', message });
