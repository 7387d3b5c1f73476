// `abc serve` runs the gateway on a worker thread of its own, so HTTP and WebSocket
// work and the core's work use two cores. The gateway still reaches the core only
// over gRPC, exactly as a separate `abc gateway` process would.
import { Worker } from 'node:worker_threads';
import type { Gateway } from '../../gateway/server.js';
import type { LogLevel } from '../config.js';

export interface GatewayThreadOptions {
  coreAddr: string;
  host: string;
  port: number;
  logLevel: LogLevel;
  wsPingIntervalMs: number;
  corsOrigins: readonly string[];
  authFailuresPerMinute: number;
  trustedProxies: readonly string[];
  tls?: { cert: Buffer; key: Buffer; ca?: Buffer };
}

type FromWorker = { ready: string } | { failed: string; code?: string };

export interface GatewayThread extends Gateway {
  thread: Worker;
}

/**
 * Starts the gateway thread and resolves once it listens. `onCrash` is told when
 * the thread ends without being asked to.
 */
export function startGatewayThread(opts: GatewayThreadOptions, onCrash: (error: Error) => void): Promise<GatewayThread> {
  // ABC runs TypeScript through tsx's loader (bin/abc.js), which a new thread must register again.
  const tsx = import.meta.resolve('tsx/esm/api');
  const entry = new URL('./gateway-worker.ts', import.meta.url).href;
  const boot = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); })`;
  const worker = new Worker(boot, { eval: true, workerData: opts, name: 'abc-gateway' });
  let closing = false;
  let started = false;
  let lastError: Error | undefined;
  worker.on('error', (error) => (lastError = error));
  const exited = new Promise<number>((resolve) => worker.once('exit', resolve));

  return new Promise((resolve, reject) => {
    worker.once('message', (message: FromWorker) => {
      if ('failed' in message) return reject(Object.assign(new Error(message.failed), message.code && { code: message.code }));
      started = true;
      resolve({
        url: message.ready,
        thread: worker,
        close: async () => {
          closing = true;
          worker.postMessage('close'); // ignored by a thread that has already ended
          await exited;
        },
      });
    });
    void exited.then((code) => {
      const error = lastError ?? new Error(`the gateway thread exited with code ${code}`);
      reject(error); // no effect once started
      // A thread that never started has said why through the rejection.
      if (started && !closing) onCrash(error);
    });
  });
}
