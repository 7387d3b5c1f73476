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
  trustedProxies?: readonly string[];
  /** HTTPS (and WSS) with this certificate and key; with `ca`, mutual TLS to the core as well. */
  tls?: { cert: Buffer; key: Buffer; ca?: Buffer };
}

export async function startGateway(opts: StartGatewayOptions): Promise<Gateway> {
  // A core with TLS is trusted by its CA (mutual TLS: the gateway presents its own certificate), or by its certificate itself.
  const core = connectCore(opts.coreAddr, {}, opts.tls && (opts.tls.ca ? { ca: opts.tls.ca, cert: opts.tls.cert, key: opts.tls.key } : { ca: opts.tls.cert }));
  const app = buildGateway({
    core,
    logger: opts.logger.child({ component: 'gateway' }),
    wsPingIntervalMs: opts.wsPingIntervalMs,
    corsOrigins: opts.corsOrigins,
    authFailuresPerMinute: opts.authFailuresPerMinute,
    trustedProxies: opts.trustedProxies,
    ...(opts.tls && { https: { cert: opts.tls.cert, key: opts.tls.key } }),
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
