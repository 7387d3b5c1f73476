// The floor of a sync contract's path, for bench/durable: what one analyze_portfolio
// contract must cross and do in ABC's shape, with none of ABC's own logic. A POST
// into Fastify on a gateway thread; one grpc-js unary call over a loopback socket to
// the main thread; there, the pack's eight steps as DBOS runs them
// (bench/portfolio-steps.ts) and the records of a contract ABC ran, written
// straight in ABC's three commits (bench/records-floor.ts: the admission and the
// plan before the steps, the rest after); the result back as JSON. No auth, no
// validation, no plan, no state machine, no logs.
// Arguments: a database URL and the ticket of a contract ABC completed there. Prints its URL.
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import pg from 'pg';
import { steps, packDbOver, type Outputs } from './portfolio-steps.js';
import { ABC_COMMITS, recordsFloor } from './records-floor.js';
import { bytesClient, bytesService, serveBytes } from './bytes-rpc.js';

const service = bytesService('Floor', { submit: 'unary' });

async function core(url: string, ticket: string): Promise<number> {
  const records = await recordsFloor(url, ticket, 16, ABC_COMMITS);
  const pool = new pg.Pool({ connectionString: url, max: 16 });
  pool.on('error', () => {});
  const work = steps(packDbOver(pool));
  let copies = 0;
  const submit = async (request: Buffer): Promise<Buffer> => {
    JSON.parse(request.toString()); // the request is read, as ABC's core reads it; nothing of it is checked
    const [admission, plan, rest] = records.commits(copies++);
    await admission!();
    await plan!();
    const outputs: Outputs = {};
    for (const step of work) outputs[step.id] = await step.run(outputs);
    await rest!();
    return Buffer.from(JSON.stringify({ kind: 'result', result: (outputs.report as { result: unknown }).result }));
  };
  return serveBytes(service, {
    submit: (call: { request: Buffer }, callback: (e: Error | null, res?: Buffer) => void) => {
      submit(call.request).then((res) => callback(null, res), (error: Error) => callback(error));
    },
  });
}

async function gateway(port: number): Promise<string> {
  const { default: Fastify } = await import('fastify');
  const client = bytesClient<{ submit(req: Buffer, cb: (e: Error | null, res: Buffer) => void): void }>(service, port);
  const app = Fastify();
  app.post('/v1/contracts:submit', (req, reply) =>
    new Promise((resolve) => client.submit(Buffer.from(JSON.stringify(req.body)), (e, res) => resolve(e ? reply.code(502).send({ error: e.message }) : reply.type('application/json').send(res)))),
  );
  return app.listen({ host: '127.0.0.1', port: 0 });
}

if (isMainThread) {
  const port = await core(process.argv[2]!, process.argv[3]!);
  // The gateway thread registers tsx's loader again, as `abc serve`'s does.
  const tsx = import.meta.resolve('tsx/esm/api');
  const boot = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(import.meta.url)}); })`;
  const thread = new Worker(boot, { eval: true, workerData: { port } });
  thread.once('message', (url: string) => process.stdout.write(`${url}\n`));
  thread.once('error', (error) => {
    console.error(error);
    process.exit(1);
  });
} else {
  parentPort!.postMessage(await gateway((workerData as { port: number }).port));
}
