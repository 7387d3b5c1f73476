// The floor of a sync contract's path, for bench/durable: what one analyze_portfolio
// contract must cross and do in ABC's shape, with none of ABC's own logic. A POST
// into Fastify on a gateway thread; one grpc-js unary call over a loopback socket to
// the main thread; there, the pack's eight steps as DBOS runs them
// (bench/portfolio-steps.ts) and the records of a contract ABC ran, written
// straight in ABC's two commits (bench/records-floor.ts: the admission with the
// plan, going out while the first step runs, the rest after); the result back as JSON. No auth, no
// validation, no plan, no state machine, no logs.
// Arguments: a database URL and the ticket of a contract ABC completed there. Prints its URL.
import pg from 'pg';
import { steps, packDbOver, type Outputs } from './portfolio-steps.js';
import { ABC_COMMITS, recordsFloor } from './records-floor.js';
import { bytesService, relayPosts, runFloor, serveUnary } from './bytes-rpc.js';

const service = bytesService('Floor', { submit: 'unary' });

async function core(url: string, ticket: string): Promise<number> {
  const records = await recordsFloor(url, ticket, 16, ABC_COMMITS);
  const pool = new pg.Pool({ connectionString: url, max: 16 });
  pool.on('error', () => {});
  const work = steps(packDbOver(pool));
  let copies = 0;
  const submit = async (request: Buffer): Promise<Buffer> => {
    JSON.parse(request.toString()); // the request is read, as ABC's core reads it; nothing of it is checked
    const [admitted, rest] = records.commits(copies++);
    // As ABC does, the first step runs while the admission with the plan goes out, and nothing after it waits less.
    const first = admitted!();
    first.catch(() => undefined);
    const outputs: Outputs = {};
    for (const [i, step] of work.entries()) {
      outputs[step.id] = await step.run(outputs);
      if (i === 0) await first;
    }
    await rest!();
    return Buffer.from(JSON.stringify({ kind: 'result', result: (outputs.report as { result: unknown }).result }));
  };
  return serveUnary(service, 'submit', submit);
}

await runFloor(import.meta.url, () => core(process.argv[2]!, process.argv[3]!), (port) => relayPosts(service, 'submit', port, '/v1/contracts:submit'));
