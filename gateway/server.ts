// Starts the gateway: connects to the core and listens.
import type { Logger } from 'pino';
import { buildGateway } from './app.js';
import { closeCore, connectCore } from './core-client.js';

export interface Gateway {
  /** http://HOST:PORT the gateway listens on. */
  url: string;
  close(): Promise<void>;
}

export interface StartGatewayOptions {
  coreAddr: string;
  host: string;
  port: number;
  logger: Logger;
  wsPingIntervalMs?: number;
  corsOrigins?: readonly string[];
  authFailuresPerMinute?: number;
}

export async function startGateway(opts: StartGatewayOptions): Promise<Gateway> {
  const core = connectCore(opts.coreAddr);
  const app = buildGateway({
    core,
    logger: opts.logger.child({ component: 'gateway' }),
    wsPingIntervalMs: opts.wsPingIntervalMs,
    corsOrigins: opts.corsOrigins,
    authFailuresPerMinute: opts.authFailuresPerMinute,
  });
  const url = await app.listen({ host: opts.host, port: opts.port });
  return {
    url,
    close: async () => {
      await app.close();
      closeCore(core);
    },
  };
}
