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
  /** Stable machine code, e.g. `invalid_request`, `agent_error`, `SCHEMA_VIOLATION`. */
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
    // A library's error around one of ABC's (the `openai` SDK's around its fetch's refusal) keeps ABC's meaning.
    if (thrown instanceof Error && thrown.cause instanceof AbcError) return thrown.cause;
    if (isDatabaseUnavailable(thrown)) return databaseUnavailable(thrown);
    if (isTransactionConflict(thrown)) return new AbcError('ABORTED', { code: 'conflict', message: 'a concurrent change got in the way; retry', retryable: true }, { cause: thrown });
    const data = databaseDataError(thrown);
    if (data) return new AbcError('INVALID_ARGUMENT', { code: 'invalid_request', message: data }, { cause: thrown });
    return new AbcError('INTERNAL', { code: 'internal_error', message: 'internal error' }, { cause: thrown });
  }
}

export const invalidRequest = (message: string, field?: string) =>
  new AbcError('INVALID_ARGUMENT', { code: 'invalid_request', message, details: field ? { field } : undefined });

/** A request's page size: 0 asks for `fallback`, and one outside 1-`max` is refused. */
export function pageLimit(limit: number, fallback: number, max: number): number {
  if (limit < 0 || limit > max) throw invalidRequest(`limit must be 1-${max}`, 'limit');
  return limit || fallback;
}

export const notFound = (what: string, id: string) =>
  new AbcError('NOT_FOUND', { code: 'not_found', message: `${what} ${id} not found`, details: { [what]: id } });

export const unauthenticated = (message = 'a valid API key is required') =>
  new AbcError('UNAUTHENTICATED', { code: 'unauthenticated', message });

export const databaseUnavailable = (cause?: unknown) =>
  new AbcError('UNAVAILABLE', { code: 'database_unavailable', category: 'INTERNAL', message: 'the database is unreachable; retry shortly', retryable: true, retryAfterSeconds: 1 }, { cause });

/** `thrown` and the errors it wraps (drivers wrap the driver's error in `cause`), outermost first. */
function* causes(thrown: unknown): Generator<{ code?: unknown; message?: unknown }> {
  let e = thrown as { code?: unknown; message?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; e && typeof e === 'object' && depth < 5; depth++, e = e.cause as typeof e) yield e;
}

const codeOf = (e: { code?: unknown }) => (typeof e.code === 'string' ? e.code : '');

// SQLSTATE class 08 (connection exception, but not 08P01: a malformed message)
// and 57P (operator intervention: shutdown, crash recovery, cannot connect now),
// and the socket and pool errors of a server that is gone.
const UNAVAILABLE_SQLSTATE = /^(0800[0-6]|57P0[1-3]|53300)$/;
const UNAVAILABLE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
const UNAVAILABLE_MESSAGE = /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed and is not queryable|the database system is (starting up|shutting down|in recovery mode)|Cannot use a pool after calling end/i;

/** Whether `thrown` means the database cannot be reached right now (retryable), not that the request is wrong. */
export function isDatabaseUnavailable(thrown: unknown): boolean {
  for (const e of causes(thrown)) {
    const code = codeOf(e);
    if (UNAVAILABLE_ERRNO.has(code) || UNAVAILABLE_SQLSTATE.test(code)) return true;
    if (typeof e.message === 'string' && UNAVAILABLE_MESSAGE.test(e.message)) return true;
  }
  return false;
}

// SQLSTATE class 22 (data exception): a value PostgreSQL refuses, such as a NUL
// byte, an out-of-range number or a lone surrogate. Boundaries refuse these
// first; this is the net under them, so such input is never a 500.
const DATA_MESSAGES: Record<string, string> = {
  '22003': 'a number is out of range',
  '22008': 'a timestamp is out of range',
  '22021': 'a string holds a byte sequence that is not valid text (such as NUL)',
  '22P05': 'a string holds an unsupported Unicode escape (NUL or a lone surrogate)',
  '22P02': 'a value has the wrong syntax for its type',
  '22001': 'a string is too long',
  // The driver sends a NUL inside a parameter as a malformed protocol message.
  '08P01': 'a value could not be sent to the database (such as a string holding NUL)',
  '54000': 'a value is too large or too deeply nested',
  '54001': 'a value is too deeply nested',
};

/** A safe message when `thrown` is PostgreSQL refusing a value, else undefined. */
export function databaseDataError(thrown: unknown): string | undefined {
  for (const e of causes(thrown)) if (DATA_MESSAGES[codeOf(e)]) return DATA_MESSAGES[codeOf(e)];
  return undefined;
}

/** A deadlock victim (40P01) or a serialization failure (40001): the same transaction may simply run again. */
export function isTransactionConflict(thrown: unknown): boolean {
  for (const e of causes(thrown)) if (codeOf(e) === '40P01' || codeOf(e) === '40001') return true;
  return false;
}
