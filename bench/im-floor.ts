// The floor of an IM run, for bench/fanout: the same hops and libraries as ABC
// (a Fastify WebSocket -> a grpc-js stream over a loopback socket -> undici to
// the agent, SSE parsed by eventsource-parser -> pg) and the same durability
// (the run and its user message committed before the agent is called, each
// delta committed before the client sees it, the answer committed with the
// run's end), with none of ABC's other work: no auth, policy or quota, no
// notifications, presence or logs. The bare floor keeps no session,
// transcript or numbered event log either; the records floor keeps ABC's (see
// recordWrites). As in ABC, the deltas of every run share their commits, the
// deltas that queue behind their run's commit go out as one, and the frames a
// connection has ready together travel in one gRPC message and one socket
// write. Prints its URL.
// Arguments: a database URL, the agent's URL, and `records` for the records floor.
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

/** A run's three kinds of commit; `seq` is the run's last event's number. */
interface Writes {
  /** Commits the run's start; returns its last event's number. */
  start(run: RunRow, content: string): Promise<number>;
  deltas(batch: Delta[]): Promise<unknown>;
  end(run: RunRow, seq: number, answer: string): Promise<unknown>;
}
/** `base`: the session's event head before the run. */
interface RunRow { runId: string; sessionId: string; userId: string; agentId: string; base: number }
interface Delta { run: RunRow; seq: number; text: string; done: () => void }

/** Three tables of the floor's own: a run's status, its two messages, its deltas. */
async function bareWrites(): Promise<Writes> {
  await pool.query(`CREATE TABLE IF NOT EXISTS floor_runs (run_id text PRIMARY KEY, status text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
    CREATE TABLE IF NOT EXISTS floor_messages (run_id text NOT NULL REFERENCES floor_runs, role text NOT NULL, content text NOT NULL);
    CREATE TABLE IF NOT EXISTS floor_events (id bigserial PRIMARY KEY, run_id text NOT NULL REFERENCES floor_runs, seq int NOT NULL, payload jsonb NOT NULL)`);
  return {
    start: async (run, content) => {
      await pool.query({
        name: 'start',
        text: "WITH r AS (INSERT INTO floor_runs (run_id, status) VALUES ($1, 'RUNNING') RETURNING run_id) INSERT INTO floor_messages SELECT run_id, 'user', $2 FROM r",
        values: [run.runId, content],
      });
      return 0;
    },
    deltas: (batch) =>
      pool.query({
        name: 'deltas',
        text: "INSERT INTO floor_events (run_id, seq, payload) SELECT r, s, jsonb_build_object('text', t) FROM unnest($1::text[], $2::int[], $3::text[]) AS u(r, s, t)",
        values: [batch.map((d) => d.run.runId), batch.map((d) => d.seq), batch.map((d) => d.text)],
      }),
    end: (run, _seq, answer) =>
      pool.query({
        name: 'end',
        text: "WITH r AS (UPDATE floor_runs SET status = 'DONE' WHERE run_id = $1 RETURNING run_id) INSERT INTO floor_messages SELECT run_id, 'assistant', $2 FROM r",
        values: [run.runId, answer],
      }),
  };
}

/**
 * The rows ABC leaves for an IM run, in its own tables (with their indexes,
 * foreign keys and defaults): the session, the run, its user and assistant
 * messages, and its events numbered in the run and in the session (three at
 * the start, a delta event a commit, two at the end), one statement a commit
 * as above. The run's and session's event heads are counted here, written at
 * the start and the end: the bench gives each run a session of its own. The
 * runs carry a lease far ahead, so ABC's recovery leaves them alone.
 */
async function recordWrites(): Promise<Writes> {
  const events = (run: RunRow, first: number, list: { type: string; payload: object }[]) =>
    JSON.stringify(list.map((e, i) => ({ event_id: `${run.runId}_${first + i}`, seq: first + i, type: e.type, payload: e.payload })));
  // The events of `r` (a run_id, session_id and base), from the parameters `list` and `ts`.
  const insertEvents = (ts: string, list: string) => `INSERT INTO events (event_id, run_id, session_id, seq, session_seq, ts, type, payload)
    SELECT e.event_id, r.run_id, r.session_id, e.seq, r.base + e.seq, ${ts}, e.type, e.payload
    FROM r, jsonb_to_recordset(${list}::jsonb) AS e(event_id text, seq int, type text, payload jsonb)`;
  return {
    start: async (run, content) => {
      const started = [
        { type: 'user_input', payload: { message: { role: 'user', content }, request_id: null } },
        { type: 'run_started', payload: { agent_id: run.agentId, trace_id: run.runId, request_id: null, parent_run_id: null } },
        { type: 'agent_invoke_started', payload: { agent_id: run.agentId, endpoint: agentUrl } },
      ];
      const { rows } = await pool.query<{ base: string }>({
        name: 'start',
        text: `WITH s AS (
            INSERT INTO sessions (session_id, user_id, tenant_id, event_head) VALUES ($2, $3, 'default', $9)
            ON CONFLICT (session_id) DO UPDATE SET event_head = sessions.event_head + $9 RETURNING event_head - $9 AS base),
          r AS (
            INSERT INTO runs (run_id, session_id, root_agent_id, status, trace_id, user_id, tenant_id, last_seq, lease_owner, lease_until)
            SELECT $1, $2, $4, 'RUNNING', $1, $3, 'default', $9, 'im-floor', now() + interval '1 hour' FROM s
            RETURNING run_id, session_id, (SELECT base FROM s) AS base),
          m AS (INSERT INTO messages (message_id, session_id, run_id, role, content) SELECT $5, session_id, run_id, 'user', $6 FROM r)
          ${insertEvents('$7', '$8')} RETURNING session_seq - seq AS base`,
        values: [run.runId, run.sessionId, run.userId, run.agentId, `${run.runId}_user`, content, Date.now(), events(run, 1, started), started.length],
      });
      run.base = Number(rows[0]!.base);
      return started.length;
    },
    deltas: (batch) =>
      pool.query({
        name: 'deltas',
        text: `INSERT INTO events (event_id, run_id, session_id, seq, session_seq, ts, type, payload)
          SELECT r || '_' || s, r, sid, s, b + s, $6, 'agent_stream_delta', jsonb_build_object('text', t)
          FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::text[]) AS u(r, sid, b, s, t)`,
        values: [batch.map((d) => d.run.runId), batch.map((d) => d.run.sessionId), batch.map((d) => d.run.base), batch.map((d) => d.seq), batch.map((d) => d.text), Date.now()],
      }),
    end: (run, seq, answer) => {
      const ended = [
        { type: 'agent_invoke_done', payload: { usage: {}, agent_id: run.agentId } },
        { type: 'run_done', payload: { usage: { total_tokens: 0, prompt_tokens: 0, completion_tokens: 0 }, final_message: answer } },
      ];
      return pool.query({
        name: 'end',
        text: `WITH r AS (
            UPDATE runs SET status = 'DONE', ended_at = now(), last_seq = $2, version = version + 1 WHERE run_id = $1
            RETURNING run_id, session_id, $3::int AS base),
          s AS (UPDATE sessions SET event_head = $3 + $2 WHERE session_id = (SELECT session_id FROM r)),
          m AS (INSERT INTO messages (message_id, session_id, run_id, role, content) SELECT $4, session_id, run_id, 'assistant', $5 FROM r)
          ${insertEvents('$6', '$7')}`,
        values: [run.runId, seq + ended.length, run.base, `${run.runId}_answer`, answer, Date.now(), events(run, seq + 1, ended)],
      });
    },
  };
}

const writes = process.argv[4] === 'records' ? await recordWrites() : await bareWrites();

/** Group commit: deltas waiting while one insert is in flight go out together in the next. */
const waiting: Delta[] = [];
let writing = false;
async function drain(): Promise<void> {
  writing = true;
  while (waiting.length) {
    const batch = waiting.splice(0);
    await writes.deltas(batch);
    for (const d of batch) d.done();
  }
  writing = false;
}
const commitDelta = (run: RunRow, seq: number, text: string) =>
  new Promise<void>((done) => {
    waiting.push({ run, seq, text, done });
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
  let userId = '';
  call.on('data', async (data: Buffer) => {
    const frame = JSON.parse(data.toString()) as { type: string; user_id?: string; session_id?: string; agent_id?: string; message?: { content: string } };
    if (frame.type === 'hello') userId = frame.user_id ?? '';
    if (frame.type !== 'agent_invoke') return;
    const run: RunRow = { runId: `run_${process.pid}_${++runs}`, sessionId: frame.session_id!, userId, agentId: frame.agent_id!, base: 0 };
    const runId = run.runId;
    let seq = await writes.start(run, frame.message!.content);
    send({ type: 'run_started', run_id: runId });
    const res = await request(`${agentUrl}/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ run_id: runId, input_message: frame.message }) });
    let answer = '';
    // As in ABC, the deltas that queue behind the run's commit in flight go out as one, up to 16 KiB of text.
    const queued: string[] = [];
    let flushing: Promise<void> | undefined;
    const flush = async () => {
      while (queued.length) {
        let text = queued.shift()!;
        while (queued.length && text.length + queued[0]!.length <= MAX_COALESCED_TEXT) text += queued.shift()!;
        await commitDelta(run, ++seq, text);
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
    await writes.end(run, seq, answer);
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
