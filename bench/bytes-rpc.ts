// The gRPC hop of the floors (bench/floor, read-floor, contract-floor, call-path-floor, im-floor):
// a grpc-js service whose messages are raw bytes, with no protobuf, served on a
// loopback port, and a client for it.
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
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

/** Serves `handle` as the unary `method` of `service` on a free loopback port; resolves to the port. */
export function serveUnary(service: ServiceDefinition, method: string, handle: (request: Buffer) => Promise<Buffer>): Promise<number> {
  return serveBytes(service, {
    [method]: (call: { request: Buffer }, callback: (e: Error | null, res?: Buffer) => void) => {
      handle(call.request).then((res) => callback(null, res), (error: Error) => callback(error));
    },
  });
}

/** Fastify on a free loopback port: a POST to `route` relays its JSON body to the unary `method` at `port`, and its answer back as JSON. */
export async function relayPosts(service: ServiceDefinition, method: string, port: number, route: string): Promise<string> {
  const { default: Fastify } = await import('fastify');
  const client = bytesClient<Record<string, (req: Buffer, cb: (e: Error | null, res: Buffer) => void) => void>>(service, port);
  const app = Fastify();
  app.post(route, (req, reply) =>
    new Promise((resolve) => client[method]!(Buffer.from(JSON.stringify(req.body)), (e, res) => resolve(e ? reply.code(502).send({ error: e.message }) : reply.type('application/json').send(res)))),
  );
  return app.listen({ host: '127.0.0.1', port: 0 });
}

/**
 * Runs a floor in `abc serve`'s shape: `core` on the main thread, and
 * `gateway`, given the core's port, on a worker thread that loads `module`
 * again (registering tsx's loader, as `abc serve`'s gateway thread does).
 * Prints the gateway's URL.
 */
export async function runFloor(module: string, core: () => Promise<number>, gateway: (port: number) => Promise<string>): Promise<void> {
  if (!isMainThread) {
    parentPort!.postMessage(await gateway((workerData as { port: number }).port));
    return;
  }
  const port = await core();
  const tsx = import.meta.resolve('tsx/esm/api');
  const boot = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(module)}); })`;
  const thread = new Worker(boot, { eval: true, workerData: { port } });
  thread.once('message', (url: string) => process.stdout.write(`${url}\n`));
  thread.once('error', (error) => {
    console.error(error);
    process.exit(1);
  });
}
