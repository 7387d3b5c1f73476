// AbcError <-> gRPC status. The seed error payload rides in `abc-error-bin`
// metadata, and in the standard `grpc-status-details-bin` (google.rpc.Status
// with an ErrorInfo, and a RetryInfo when a retry delay is known) for clients
// that read the rich error model.
import { Metadata, type ServiceError, status as GrpcStatus } from '@grpc/grpc-js';
import { Error as ErrorMessage, ErrorCategory } from '../../gen/abc/common/v1/error.js';
import { ErrorInfo, RetryInfo } from '../../gen/google/rpc/error_details.js';
import { Status as RpcStatus } from '../../gen/google/rpc/status.js';
import { AbcError, Status } from '../domain/errors.js';
import { storedError, type StoredError } from '../domain/stored-error.js';

export const ERROR_METADATA_KEY = 'abc-error-bin';
export const STATUS_DETAILS_KEY = 'grpc-status-details-bin';
/** ErrorInfo.domain of ABC's errors. */
export const ERROR_DOMAIN = 'abc';

/** The wire form of an error: status, message, and the encoded payload, twice. */
export function toServiceError(error: AbcError): Partial<ServiceError> {
  const code = Status[error.status] as GrpcStatus;
  const message = toErrorMessage(error);
  const metadata = new Metadata();
  metadata.set(ERROR_METADATA_KEY, Buffer.from(ErrorMessage.encode(message).finish()));
  metadata.set(STATUS_DETAILS_KEY, Buffer.from(RpcStatus.encode(richStatus(code, message)).finish()));
  return { code, details: error.payload.message, metadata };
}

/** google.rpc.Status of an error: ErrorInfo {reason: code, domain: abc, metadata: category, retryable, trace_id}, RetryInfo. */
function richStatus(code: number, e: ErrorMessage): RpcStatus {
  const info = ErrorInfo.encode({
    reason: e.code,
    domain: ERROR_DOMAIN,
    metadata: { category: e.category.replace(/^ERROR_CATEGORY_/, ''), retryable: String(e.retryable), ...(e.traceId && { trace_id: e.traceId }) },
  }).finish();
  const details = [{ typeUrl: 'type.googleapis.com/google.rpc.ErrorInfo', value: Buffer.from(info) }];
  if (e.retryAfterSeconds) {
    const retry = RetryInfo.encode({ retryDelay: { seconds: Math.floor(e.retryAfterSeconds), nanos: Math.round((e.retryAfterSeconds % 1) * 1e9) } }).finish();
    details.push({ typeUrl: 'type.googleapis.com/google.rpc.RetryInfo', value: Buffer.from(retry) });
  }
  return { code, message: e.message, details };
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
