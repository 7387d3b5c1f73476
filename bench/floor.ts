// The floor of the proxy path, for bench/llm-proxy: the same hops and libraries as
// ABC (Fastify -> grpc-js over a loopback socket -> undici -> upstream) with none of
// ABC's work: no auth, no validation, no accounting, no logs, no SSE parsing (a
// stream goes through as the bytes of each socket read). Prints its URL.
import Fastify from 'fastify';
import { Pool } from 'undici';
import { bytesClient, bytesService, serveBytes } from './bytes-rpc.js';

const upstream = new URL(process.argv[2]!);
const service = bytesService('Floor', { complete: 'unary', stream: 'server-stream' });

const pool = new Pool(upstream.origin, { connections: 256 });
const port = await serveBytes(service, {
  complete: async (call: { request: Buffer }, callback: (e: Error | null, res?: Buffer) => void) => {
    try {
      const res = await pool.request({ method: 'POST', path: `${upstream.pathname}/chat/completions`, headers: { 'content-type': 'application/json' }, body: call.request });
      callback(null, Buffer.from(await res.body.arrayBuffer()));
    } catch (error) {
      callback(error as Error);
    }
  },
  // A stream relays the upstream's body as it reads it: one message per socket read, unparsed.
  stream: async (call: { request: Buffer; write(b: Buffer): boolean; end(): void; destroy(e: Error): void }) => {
    try {
      const res = await pool.request({ method: 'POST', path: `${upstream.pathname}/chat/completions`, headers: { 'content-type': 'application/json' }, body: call.request });
      for await (const part of res.body) call.write(part as Buffer);
      call.end();
    } catch (error) {
      call.destroy(error as Error);
    }
  },
});
const client = bytesClient<{
  complete(req: Buffer, cb: (e: Error | null, res: Buffer) => void): void;
  stream(req: Buffer): NodeJS.EventEmitter & { cancel(): void };
}>(service, port);

const app = Fastify();
app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
app.post('/v1/chat/completions', (req, reply) => {
  const body = req.body as Buffer;
  if (!body.includes('"stream":true')) return new Promise((resolve) => client.complete(body, (e, res) => resolve(e ? reply.code(502).send() : reply.type('application/json').send(res))));
  reply.hijack();
  reply.raw.writeHead(200, { 'content-type': 'text/event-stream' });
  const stream = client.stream(body);
  stream.on('data', (part: Buffer) => reply.raw.write(part));
  stream.on('end', () => reply.raw.end());
  stream.on('error', () => reply.raw.end());
  reply.raw.on('close', () => stream.cancel());
});
process.stdout.write(`${await app.listen({ host: '127.0.0.1', port: 0 })}\n`);
