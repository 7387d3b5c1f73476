// The floor of a read (or a one-row write) through a gateway, for bench/contracts and bench/observer:
// the same hops and libraries as ABC (Fastify -> grpc-js over a loopback socket
// -> pg -> JSON) with none of ABC's work: no auth, no tenant check, no mapping,
// no validation, no logs. `/sql/NAME/ARG` skips the gRPC hop (HTTP + SELECT).
// Arguments: a database URL and a JSON object of named queries taking $1.
// Prints its URL.
import Fastify from 'fastify';
import pg from 'pg';
import { bytesClient, bytesService, serveBytes } from './bytes-rpc.js';

const pool = new pg.Pool({ connectionString: process.argv[2], max: 16 });
const queries = JSON.parse(process.argv[3]!) as Record<string, string>;
const read = async (name: string, arg: string) => Buffer.from(JSON.stringify((await pool.query(queries[name]!, [arg])).rows));

const service = bytesService('Floor', { read: 'unary' });
const port = await serveBytes(service, {
  read: (call: { request: Buffer }, callback: (e: Error | null, res?: Buffer) => void) => {
    const { name, arg } = JSON.parse(call.request.toString()) as { name: string; arg: string };
    read(name, arg).then((res) => callback(null, res), (error: Error) => callback(error));
  },
});
const client = bytesClient<{ read(req: Buffer, cb: (e: Error | null, res: Buffer) => void): void }>(service, port);

const app = Fastify();
app.get<{ Params: { name: string; arg: string } }>('/sql/:name/:arg', async (req, reply) => reply.type('application/json').send(await read(req.params.name, req.params.arg)));
app.get<{ Params: { name: string; arg: string } }>('/grpc/:name/:arg', (req, reply) =>
  new Promise((resolve) => client.read(Buffer.from(JSON.stringify(req.params)), (e, res) => resolve(e ? reply.code(502).send() : reply.type('application/json').send(res)))),
);
process.stdout.write(`${await app.listen({ host: '127.0.0.1', port: 0 })}\n`);
