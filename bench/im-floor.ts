// The floor of an IM run, for bench/fanout: the same hops and libraries as ABC
// (a Fastify WebSocket -> a grpc-js stream over a loopback socket -> undici to
// the agent, SSE parsed by eventsource-parser -> pg) and the same durability
// (the run and its user message committed before the agent is called, each
// delta committed before the client sees it, the answer committed with the
// run's end), with none of ABC's work: no auth, no sessions or transcripts, no
// policy, no event log with cursors and notifications, no presence, no logs.
// As in ABC, the deltas of every run share their commits, the deltas that
// queue behind their run's commit go out as one, and the frames a connection
// has ready together travel in one gRPC message and one socket write. Prints its URL.
// Arguments: a database URL and the agent's URL.
import type { ClientDuplexStream, ServerDuplexStream } from '@grpc/grpc-js';
import websocket from '@fastify/websocket';
import { createParser } from 'eventsource-parser';
import Fastify from 'fastify';
import pg from 'pg';
import { request } from 'undici';
import { bytesClient, bytesService, serveBytes } from './bytes-rpc.js';
import { MAX_COALESCED_TEXT } from '../src/orchestrator/event-writer.js';

const [url, agentUrl] = process.argv.slice(2) as [string, string];
const pool = new pg.Pool({ connectionString: url, max: 16 });
await pool.query(`CREATE TABLE IF NOT EXISTS floor_runs (run_id text PRIMARY KEY, status text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
  CREATE TABLE IF NOT EXISTS floor_messages (run_id text NOT NULL REFERENCES floor_runs, role text NOT NULL, content text NOT NULL);
  CREATE TABLE IF NOT EXISTS floor_events (id bigserial PRIMARY KEY, run_id text NOT NULL REFERENCES floor_runs, seq int NOT NULL, payload jsonb NOT NULL)`);

/** Group commit: deltas waiting while one insert is in flight go out together in the next. */
const waiting: { runId: string; seq: number; text: string; done: () => void }[] = [];
let writing = false;
async function drain(): Promise<void> {
  writing = true;
  while (waiting.length) {
    const batch = waiting.splice(0);
    await pool.query({
      name: 'deltas',
      text: "INSERT INTO floor_events (run_id, seq, payload) SELECT r, s, jsonb_build_object('text', t) FROM unnest($1::text[], $2::int[], $3::text[]) AS u(r, s, t)",
      values: [batch.map((d) => d.runId), batch.map((d) => d.seq), batch.map((d) => d.text)],
    });
    for (const d of batch) d.done();
  }
  writing = false;
}
const commitDelta = (runId: string, seq: number, text: string) =>
  new Promise<void>((done) => {
    waiting.push({ runId, seq, text, done });
    if (!writing) queueMicrotask(() => void drain());
  });

let runs = 0;
/** The core's side of one connection: a run per invoke, its frames in order. */
function connect(call: ServerDuplexStream<Buffer, Buffer>): void {
  let ready: object[] = [];
  const send = (frame: object) => {
    if (ready.push(frame) > 1) return;
    setImmediate(() => {
      call.write(Buffer.from(JSON.stringify(ready)));
      ready = [];
    });
  };
  call.on('data', async (data: Buffer) => {
    const frame = JSON.parse(data.toString()) as { type: string; message?: { content: string } };
    if (frame.type !== 'agent_invoke') return;
    const runId = `run_${process.pid}_${++runs}`;
    await pool.query({
      name: 'start',
      text: "WITH r AS (INSERT INTO floor_runs (run_id, status) VALUES ($1, 'RUNNING') RETURNING run_id) INSERT INTO floor_messages SELECT run_id, 'user', $2 FROM r",
      values: [runId, frame.message!.content],
    });
    send({ type: 'run_started', run_id: runId });
    const res = await request(`${agentUrl}/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ run_id: runId, input_message: frame.message }) });
    let seq = 0;
    let answer = '';
    // As in ABC, the deltas that queue behind the run's commit in flight go out as one, up to 16 KiB of text.
    const queued: string[] = [];
    let flushing: Promise<void> | undefined;
    const flush = async () => {
      while (queued.length) {
        let text = queued.shift()!;
        while (queued.length && text.length + queued[0]!.length <= MAX_COALESCED_TEXT) text += queued.shift()!;
        await commitDelta(runId, ++seq, text);
        send({ type: 'delta', run_id: runId, text });
      }
      flushing = undefined;
    };
    const parser = createParser({
      onEvent: (event) => {
        if (event.event !== 'delta') return;
        const { text } = JSON.parse(event.data) as { text: string };
        answer += text;
        queued.push(text);
        flushing ??= flush();
      },
    });
    const decoder = new TextDecoder();
    for await (const chunk of res.body) parser.feed(decoder.decode(chunk as Buffer, { stream: true }));
    await flushing;
    await pool.query({
      name: 'end',
      text: "WITH r AS (UPDATE floor_runs SET status = 'DONE' WHERE run_id = $1 RETURNING run_id) INSERT INTO floor_messages SELECT run_id, 'assistant', $2 FROM r",
      values: [runId, answer],
    });
    send({ type: 'done', run_id: runId });
  });
  call.on('end', () => call.end());
}

const service = bytesService('Im', { connect: 'bidi' });
const port = await serveBytes(service, { connect });
const core = bytesClient<{ connect(): ClientDuplexStream<Buffer, Buffer> }>(service, port);

// The gateway's side: a WebSocket per client, a gRPC stream per WebSocket.
const app = Fastify();
await app.register(websocket);
app.get('/v1/im', { websocket: true }, (socket) => {
  const stream = core.connect();
  const tcp = (socket as unknown as { _socket: import('node:net').Socket })._socket;
  stream.on('data', (data: Buffer) => {
    tcp.cork();
    for (const frame of JSON.parse(data.toString()) as object[]) socket.send(JSON.stringify(frame));
    process.nextTick(() => tcp.uncork());
  });
  stream.on('error', () => socket.close());
  socket.on('message', (data) => stream.write(Buffer.from(data.toString())));
  socket.on('close', () => stream.end());
});
process.stdout.write(`${await app.listen({ host: '127.0.0.1', port: 0 })}\n`);
