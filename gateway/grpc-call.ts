// Promise and metadata helpers for calling the core from routes.
import { Metadata, type CallOptions, type ServiceError } from '@grpc/grpc-js';
import type { FastifyRequest } from 'fastify';
import { traceparentOf } from './tracing.js';

/** The caller's credentials and trace context, passed through to the core. */
export function metadataOf(request: FastifyRequest): Metadata {
  const metadata = new Metadata();
  const auth = request.headers.authorization;
  if (auth) metadata.set('authorization', auth);
  const key = request.headers['x-api-key'];
  if (typeof key === 'string') metadata.set('x-api-key', key);
  // The core continues the request's span.
  metadata.set('traceparent', traceparentOf(request));
  metadata.set('x-request-id', String(request.id));
  return metadata;
}

/**
 * An SSE route's metadata: a browser's EventSource sends no headers, so a
 * stream token may come as `?access_token=` (POST /v1/stream_tokens). The core
 * accepts such a token only for the event stream it names.
 */
export function streamMetadata(request: FastifyRequest, accessToken: string | undefined): Metadata {
  const metadata = metadataOf(request);
  if (accessToken && !request.headers.authorization) metadata.set('authorization', `Bearer ${accessToken}`);
  return metadata;
}

/** Calls a unary method; aborts the call when the HTTP client goes away. */
export function call<Req, Res>(
  fn: (req: Req, metadata: Metadata, options: Partial<CallOptions>, cb: (error: ServiceError | null, res: Res) => void) => { cancel(): void },
  req: Req,
  request: FastifyRequest,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    const socket = request.raw.socket;
    const onClose = () => pending.cancel();
    const pending = fn(req, metadataOf(request), {}, (error, res) => {
      socket.off('close', onClose);
      if (error) reject(error);
      else resolve(res);
    });
    socket.once('close', onClose);
  });
}
