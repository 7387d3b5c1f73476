// gRPC status -> HTTP status in one table, and the seed error body.
import type { ServiceError } from '@grpc/grpc-js';
import { Error as ErrorMessage, ErrorCategory } from '../gen/abc/common/v1/error.js';

const HTTP_STATUS: Record<number, number> = {
  0: 200, // OK
  1: 499, // CANCELLED
  2: 500, // UNKNOWN
  3: 400, // INVALID_ARGUMENT
  4: 504, // DEADLINE_EXCEEDED
  5: 404, // NOT_FOUND
  6: 409, // ALREADY_EXISTS
  7: 403, // PERMISSION_DENIED
  8: 429, // RESOURCE_EXHAUSTED
  9: 412, // FAILED_PRECONDITION
  10: 409, // ABORTED
  11: 400, // OUT_OF_RANGE
  12: 501, // UNIMPLEMENTED
  13: 500, // INTERNAL
  14: 503, // UNAVAILABLE
  15: 500, // DATA_LOSS
  16: 401, // UNAUTHENTICATED
};

export interface HttpError {
  statusCode: number;
  body: { error: ErrorBody };
}

export interface ErrorBody {
  code: string;
  category: string;
  message: string;
  retryable: boolean;
  retry_after_seconds?: number;
  details?: Record<string, unknown>;
  trace_id?: string;
}

export function httpStatusOf(grpcCode: number): number {
  return HTTP_STATUS[grpcCode] ?? 500;
}

/** Maps a failed gRPC call to an HTTP status and the seed error shape. */
export function fromGrpcError(error: unknown): HttpError {
  const e = error as Partial<ServiceError>;
  const code = typeof e.code === 'number' ? e.code : 2;
  const raw = e.metadata?.get('abc-error-bin')[0];
  const payload = Buffer.isBuffer(raw) ? ErrorMessage.decode(raw) : undefined;
  const body: ErrorBody = payload
    ? errorBody(payload)
    : code === 14
      ? { code: 'core_unavailable', category: 'INTERNAL', message: 'the ABC core is unreachable', retryable: true }
      : { code: 'internal_error', category: 'INTERNAL', message: 'internal error', retryable: true };
  return { statusCode: httpStatusOf(code), body: { error: body } };
}

export const categoryName = (c: ErrorCategory) => c.replace(/^ERROR_CATEGORY_/, '');

/** The seed error shape of an `abc.common.v1.Error`. */
export function errorBody(e: ErrorMessage): ErrorBody {
  return {
    code: e.code,
    category: categoryName(e.category),
    message: e.message,
    retryable: e.retryable,
    ...(e.retryAfterSeconds !== undefined && { retry_after_seconds: e.retryAfterSeconds }),
    ...(e.details && { details: e.details }),
    ...(e.traceId && { trace_id: e.traceId }),
  };
}
