// GET /v1/im: the IM WebSocket. Each socket is one IngressService.Connect stream;
// the gateway validates and translates frames and holds no state of its own.
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AuthFailures } from '../auth-failures.js';
import type { ConnectResponse } from '../../gen/abc/ingress/v1/ingress.js';
import type { CoreClients } from '../core-client.js';
import { metadataOf } from '../grpc-call.js';
import { parseClientFrame, serverFrameJson, type Parsed } from '../im-frames.js';
import { corkPerTick } from '../cork.js';
import { holdWhileBehind } from '../hold.js';
import { endSpan } from '../tracing.js';

/** How long the core has to end a connection's call once its socket closed. */
const CLOSE_GRACE_MS = 5000;

export interface ImGuards {
  /** Browser origins allowed to open the socket; a request with any other Origin is refused. */
  origins: readonly string[];
  /** Counts a failed hello against the client's address. */
  failures: AuthFailures;
}

export function imRoutes(app: FastifyInstance, core: CoreClients, pingIntervalMs: number, guards: ImGuards): void {
  // Browsers always send Origin; other clients need not. A page of another origin may not speak for its user.
  const preValidation = async (req: FastifyRequest, reply: FastifyReply) => {
    const origin = req.headers.origin;
    if (origin === undefined || guards.origins.includes(origin)) return;
    return reply.code(403).send({ error: { code: 'forbidden', category: 'AUTH', message: `origin ${origin.slice(0, 200)} may not open the IM socket (ABC_CORS_ORIGINS)`, retryable: false } });
  };
  app.get('/v1/im', { websocket: true, preValidation }, (socket, req) => {
    // The upgrade's span ends here; the connection's runs continue its trace.
    endSpan(req, 101);
    const stream = core.ingress.connect(metadataOf(req));
    const send = (json: Record<string, unknown>) => socket.readyState === socket.OPEN && socket.send(JSON.stringify(json));
    const ping = setInterval(() => socket.readyState === socket.OPEN && socket.ping(), pingIntervalMs);
    ping.unref();

    // ws keeps its TCP socket private; frames arriving together leave in one write to it.
    const tcp = (socket as unknown as { _socket: Socket })._socket;
    const cork = corkPerTick(tcp);
    // A client that stops reading holds its connection's frames back in the core, not here.
    const hold = holdWhileBehind(stream, tcp, () => socket.bufferedAmount, 'im');
    stream.on('data', (res: ConnectResponse) => {
      cork();
      // The gateway's hello asks for batches: frames ready together come in one message.
      for (const frame of res.frame?.$case === 'batch' ? res.frame.value.frames : [res]) {
        if (frame.frame?.$case === 'error' && frame.frame.value.code === 'unauthenticated') guards.failures.record(req.ip);
        send(serverFrameJson(frame));
      }
      hold.check();
    });
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
    const opened = Date.now();
    socket.on('close', (code, reason) => {
      clearInterval(ping);
      // What the core still sends is dropped (the socket is closed), so the call can end.
      hold.end();
      // Half-closed, the core ends the call itself with OK: no cancellation, and no
      // error built for it on either side. One that has not ended soon is cancelled.
      stream.end();
      const cancel = setTimeout(() => stream.cancel(), CLOSE_GRACE_MS).unref();
      stream.on('status', () => clearTimeout(cancel));
      // The socket's end, a client that left included, is one info line.
      req.log.info({ url: req.url, code, reason: reason.toString().slice(0, 120), ms: Date.now() - opened }, 'im connection closed');
    });
  });
}
