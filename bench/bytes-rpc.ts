// The gRPC hop of the floors (bench/floor, read-floor, contract-floor, im-floor):
// a grpc-js service whose messages are raw bytes, with no protobuf, served on a
// loopback port, and a client for it.
import { Server, ServerCredentials, credentials, makeGenericClientConstructor, type ServiceDefinition, type UntypedServiceImplementation } from '@grpc/grpc-js';

type Shape = 'unary' | 'server-stream' | 'bidi';
const bytes = (b: Buffer) => b;

/** `/floor.NAME/Method` for each method, of the shape given. */
export function bytesService(name: string, methods: Record<string, Shape>): ServiceDefinition {
  return Object.fromEntries(
    Object.entries(methods).map(([method, shape]) => [
      method,
      {
        path: `/floor.${name}/${method[0]!.toUpperCase()}${method.slice(1)}`,
        requestStream: shape === 'bidi',
        responseStream: shape !== 'unary',
        requestSerialize: bytes,
        requestDeserialize: bytes,
        responseSerialize: bytes,
        responseDeserialize: bytes,
      },
    ]),
  );
}

/** Serves `impl` on a free loopback port; resolves to the port. */
export function serveBytes(service: ServiceDefinition, impl: UntypedServiceImplementation): Promise<number> {
  const server = new Server();
  server.addService(service, impl);
  return new Promise((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, port) => (e ? reject(e) : resolve(port))));
}

/** A client of `service` at `port`; its caller names the methods' types. */
export function bytesClient<T>(service: ServiceDefinition, port: number): T {
  const Client = makeGenericClientConstructor(service, 'floor');
  return new Client(`127.0.0.1:${port}`, credentials.createInsecure()) as unknown as T;
}
