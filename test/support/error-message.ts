// The seed error payload a failed gRPC call carries in `abc-error-bin`.
import type { ServiceError } from '@grpc/grpc-js';
import { Error as ErrorProto } from '../../gen/abc/common/v1/error.js';

export function ErrorMessage(error: ServiceError): ErrorProto {
  return ErrorProto.decode(error.metadata.get('abc-error-bin')[0] as Buffer);
}
