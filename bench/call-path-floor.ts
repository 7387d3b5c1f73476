// The floor of a tool call's path, for bench/transitions: what one echo call
// must cross and do in ABC's shape, with none of ABC's own logic. A POST into
// Fastify on a gateway thread; one grpc-js unary call over a loopback socket to
// the main thread; there, the records of a call ABC made, written straight in
// one commit (bench/call-floor.ts) on the run the request names; the result
// back as JSON. No auth, no schema or policy check, no state machine, no logs.
// Arguments: a database URL and the id of a tool call ABC completed there. Prints its URL.
import pg from 'pg';
import { callFloor } from './call-floor.js';
import { bytesService, relayPosts, runFloor, serveUnary } from './bytes-rpc.js';

const service = bytesService('CallFloor', { invoke: 'unary' });

async function core(url: string, template: string): Promise<number> {
  const records = await callFloor(url, template, 16);
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  // A run's session, read once per run, as ABC keeps a run's facts.
  const sessions = new Map<string, Promise<string>>();
  const sessionOf = (runId: string) => {
    if (!sessions.has(runId)) sessions.set(runId, pool.query<{ session_id: string }>('SELECT session_id FROM runs WHERE run_id = $1', [runId]).then((r) => r.rows[0]!.session_id));
    return sessions.get(runId)!;
  };
  let copies = 0;
  const invoke = async (request: Buffer): Promise<Buffer> => {
    const { run_id: runId, args } = JSON.parse(request.toString()) as { run_id: string; args: unknown };
    const i = copies++;
    await records.run(i, { runId, sessionId: await sessionOf(runId) });
    return Buffer.from(JSON.stringify({ status: 'succeeded', tool_call_id: `floor_${i}`, result: args }));
  };
  return serveUnary(service, 'invoke', invoke);
}

await runFloor(import.meta.url, () => core(process.argv[2]!, process.argv[3]!), (port) => relayPosts(service, 'invoke', port, '/v1/tools/echo:invoke'));
