// AbcError <-> gRPC status. The seed error payload rides in `abc-error-bin` metadata.
import { Metadata, type ServiceError, status as GrpcStatus } from '@grpc/grpc-js';
import { Error as ErrorMessage, ErrorCategory } from '../../gen/abc/common/v1/error.js';
import { AbcError, Status } from '../domain/errors.js';
import { storedError, type StoredError } from '../domain/stored-error.js';

export const ERROR_METADATA_KEY = 'abc-error-bin';

/** The wire form of an error: status, message, and the encoded payload. */
export function toServiceError(error: AbcError): Partial<ServiceError> {
  const metadata = new Metadata();
  metadata.set(ERROR_METADATA_KEY, Buffer.from(ErrorMessage.encode(toErrorMessage(error)).finish()));
  return { code: Status[error.status] as GrpcStatus, details: error.payload.message, metadata };
}

/** A stored error (runs, tool calls, tickets) on the wire; `traceId` when the row knows it better. */
export function storedErrorMessage(raw: Record<string, unknown>, traceId = ''): ErrorMessage {
  const e = storedError(raw);
  return wire({ ...e, trace_id: e.trace_id ?? traceId });
}

export function toErrorMessage(error: AbcError): ErrorMessage {
  const p = error.payload;
  return wire({ code: p.code, category: p.category, message: p.message, retryable: p.retryable, retry_after_seconds: p.retryAfterSeconds, details: p.details, trace_id: p.traceId });
}

/** The seed error shape as the proto message. */
const wire = (e: StoredError): ErrorMessage => ({
  code: e.code,
  category: `ERROR_CATEGORY_${e.category}` as ErrorCategory,
  message: e.message,
  retryable: e.retryable,
  retryAfterSeconds: e.retry_after_seconds,
  details: e.details,
  traceId: e.trace_id ?? '',
});
