import { Metadata, type ServiceError } from '@grpc/grpc-js';

export function withKey(key: string): Metadata {
  const metadata = new Metadata();
  metadata.set('authorization', `Bearer ${key}`);
  return metadata;
}

/** Calls a callback-style unary method and resolves or rejects with its ServiceError. */
export function unary<Req, Res>(
  fn: (req: Req, metadata: Metadata, cb: (error: ServiceError | null, res: Res) => void) => unknown,
  req: Req,
  metadata = new Metadata(),
): Promise<Res> {
  return new Promise((resolve, reject) => fn(req, metadata, (error, res) => (error ? reject(error) : resolve(res))));
}
