// The gateway thread of `abc serve` (see gateway-thread.ts): listens, says so, and
// closes when the main thread asks.
import { parentPort, workerData } from 'node:worker_threads';
import { startGateway } from '../../gateway/server.js';
import { createLogger } from '../runtime/log.js';
import { startTracing } from '../runtime/tracing.js';
import type { GatewayThreadOptions } from './gateway-thread.js';

const opts = workerData as GatewayThreadOptions;
const port = parentPort!;
const log = createLogger(opts.logLevel);

try {
  // Buffers cross the thread boundary as plain byte arrays.
  const tls = opts.tls && { cert: Buffer.from(opts.tls.cert), key: Buffer.from(opts.tls.key), ...(opts.tls.ca && { ca: Buffer.from(opts.tls.ca) }) };
  const tracing = await startTracing('abc-gateway', log);
  const gateway = await startGateway({ ...opts, tls, logger: log });
  port.once('message', async () => {
    await gateway.close();
    await tracing.shutdown();
    await new Promise<void>((resolve) => log.flush(() => resolve()));
    port.close();
  });
  port.postMessage({ ready: gateway.url });
} catch (error) {
  port.postMessage({ failed: (error as Error).message, code: (error as NodeJS.ErrnoException).code });
}
