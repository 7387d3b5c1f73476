// GET /v1/im: the IM WebSocket. Each socket is one IngressService.Connect stream;
// the gateway validates and translates frames and holds no state of its own.
import type { FastifyInstance } from 'fastify';
import type { ConnectResponse } from '../../gen/abc/ingress/v1/ingress.js';
import type { CoreClients } from '../core-client.js';
import { metadataOf } from '../grpc-call.js';
import { parseClientFrame, serverFrameJson, type Parsed } from '../im-frames.js';

export function imRoutes(app: FastifyInstance, core: CoreClients, pingIntervalMs: number): void {
  app.get('/v1/im', { websocket: true }, (socket, req) => {
    const stream = core.ingress.connect(metadataOf(req));
    const send = (json: Record<string, unknown>) => socket.readyState === socket.OPEN && socket.send(JSON.stringify(json));
    const ping = setInterval(() => socket.readyState === socket.OPEN && socket.ping(), pingIntervalMs);
    ping.unref();

    stream.on('data', (res: ConnectResponse) => send(serverFrameJson(res)));
    stream.on('end', () => socket.close(1000, 'closed'));
    stream.on('error', (error: { code?: number }) => {
      if (error.code === 1) return;
      send({ type: 'error', ts: Date.now(), code: 'internal_error', message: 'the connection to ABC was lost; reconnect and resume', retryable: true });
      socket.close(1011, 'core unavailable');
    });

    socket.on('message', (data, isBinary) => {
      const parsed: Parsed = isBinary ? { ok: false, field: '', message: 'frames are JSON text' } : parseClientFrame(data.toString());
      if (!parsed.ok) {
        send({
          type: 'error',
          ts: Date.now(),
          ...(parsed.requestId && { request_id: parsed.requestId }),
          ...(parsed.sessionId && { session_id: parsed.sessionId }),
          code: 'invalid_request',
          message: parsed.message,
          field: parsed.field,
          retryable: false,
        });
        return;
      }
      stream.write(parsed.request);
    });
    socket.on('close', () => {
      clearInterval(ping);
      stream.cancel();
    });
  });
}
