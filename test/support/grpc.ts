import { Metadata, type CallOptions, type ServiceError } from '@grpc/grpc-js';

export function withKey(key: string): Metadata {
  const metadata = new Metadata();
  metadata.set('authorization', `Bearer ${key}`);
  return metadata;
}

/** Calls a callback-style unary client method; rejects with its ServiceError. */
export function unary<Req, Res>(
  fn: (req: Req, metadata: Metadata, options: Partial<CallOptions>, cb: (error: ServiceError | null, res: Res) => void) => unknown,
  req: Req,
  metadata = new Metadata(),
): Promise<Res> {
  return new Promise((resolve, reject) => fn(req, metadata, {}, (error, res) => (error ? reject(error) : resolve(res))));
}

/** The ServiceError of a call expected to fail. */
export async function failure(promise: Promise<unknown>): Promise<ServiceError> {
  try {
    await promise;
  } catch (error) {
    return error as ServiceError;
  }
  throw new Error('expected the call to fail');
}
