// bench/fanout: deltas flow agent -> ABC -> WebSocket client.
// Reports, against a baseline measured in the same run:
//  - added latency per delta (p50, p99) vs the agent writing straight to a ws client;
//  - deltas per second at 1, 10 and 100 concurrent runs vs the same deltas written straight to ws;
//  - a sweep of 1, 10, 100 and 200 concurrent IM runs of 20 paced deltas: time to done, deltas per second;
//  - both of those against the floor of an IM run (bench/im-floor.ts): the same hops, libraries and commits, none of ABC's work;
//    both also against its records floor: the same, writing the rows ABC leaves for a run, in ABC's tables;
//    at each concurrency the sides take their rounds in turn, after an untimed round each;
//  - event-log appends per second (per-event commits and group commit) vs raw COPY.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import WebSocket, { WebSocketServer } from 'ws';
import { EventWriter } from '../src/orchestrator/event-writer.js';
import { EventAppender } from '../src/store/event-appender.js';
import { poolOf } from '../src/store/native.js';
import { appendEvents } from '../src/store/event-log.js';
import { createOrm } from '../src/store/orm.js';
import { benchDatabase, fmt, inTurn, loadCalls, percentile, record, startAbc, startChild, type AbcProcess } from './lib.js';

const LATENCY_DELTAS = Number(process.env.BENCH_LATENCY_DELTAS ?? 400);
const THROUGHPUT_DELTAS = Number(process.env.BENCH_THROUGHPUT_DELTAS ?? 10000);
const SWEEP_DELTAS = 20;
const APPENDS = Number(process.env.BENCH_APPENDS ?? 2000);
const PACE_MS = 2;
/** Timed rounds per side at each concurrency of the throughput table and the sweep. */
const ROUNDS = Number(process.env.BENCH_FANOUT_ROUNDS ?? 3);

/** One round of a side: the agent deltas its clients received, the frames that carried them, each run's time to done, and the round's time. */
interface Round {
  deltas: number;
  frames: number;
  times: number[];
  seconds: number;
}

/**
 * Rounds that the sides take in turn, after an untimed round each at the same
 * concurrency: every figure is of a server's steady state, its code compiled
 * and its pools grown for that load.
 */
const warmRounds = (sides: (() => Promise<Round>)[]) => inTurn(sides, ROUNDS, true);

/** A side's deltas per second over all its rounds' time, its slowest and fastest round, and the deltas a frame carried. */
function rateOf(rounds: Round[]): { rate: number; slowest: number; fastest: number; perFrame: number } {
  const sum = (f: (r: Round) => number) => rounds.reduce((n, r) => n + f(r), 0);
  const each = rounds.map((r) => r.deltas / r.seconds);
  return { rate: sum((r) => r.deltas) / sum((r) => r.seconds), slowest: Math.min(...each), fastest: Math.max(...each), perFrame: sum((r) => r.deltas) / sum((r) => r.frames) };
}

/** Time to done over every run of a side's rounds, sorted. */
const timesOf = (rounds: Round[]) => rounds.flatMap((r) => r.times).sort((a, b) => a - b);

/** The agent: paced deltas carry their send time; unpaced ones are for throughput. */
function startAgent(): Promise<http.Server> {
  const server = http.createServer(async (req, res) => {
    if (req.url === '/health') return res.end('{"status":"healthy"}');
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const { input_message } = JSON.parse(raw) as { input_message: { content: string } };
    const [mode, n] = input_message.content.split(':') as [string, string];
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (let i = 0; i < Number(n); i++) {
      const ok = res.write(`event: delta\ndata: {"text":"${performance.now()} "}\n\n`);
      if (mode === 'paced') await new Promise((r) => setTimeout(r, PACE_MS));
      else if (!ok) await new Promise((r) => res.once('drain', r));
    }
    res.end('event: done\ndata: {"usage":{}}\n\n');
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/**
 * The latency of each agent delta a frame carries. Every delta's text is its
 * send time and a space, so a frame that carries several deltas (ABC and the
 * floor store and send the deltas that queue behind a commit as one) is
 * counted as the deltas it carries.
 */
function latenciesOf(text: string): number[] {
  const now = performance.now();
  return text.split(' ').filter(Boolean).map((sent) => now - Number(sent));
}

/** Baseline: the same paced deltas written straight to a ws client. */
async function directLatencies(): Promise<number[]> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise((r) => wss.once('listening', r));
  wss.on('connection', async (socket) => {
    for (let i = 0; i < LATENCY_DELTAS; i++) {
      socket.send(JSON.stringify({ type: 'delta', text: `${performance.now()} ` }));
      await new Promise((r) => setTimeout(r, PACE_MS));
    }
    socket.send(JSON.stringify({ type: 'done' }));
  });
  const ws = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`);
  const latencies: number[] = [];
  await new Promise<void>((resolve) =>
    ws.on('message', (data) => {
      const frame = JSON.parse(data.toString());
      if (frame.type === 'delta') latencies.push(...latenciesOf(frame.text));
      else resolve();
    }),
  );
  ws.close();
  wss.close();
  return latencies;
}

/** Where IM runs go: ABC, or the floor. */
type ImServer = Pick<AbcProcess, 'http' | 'key'>;

/** One IM run through ABC (or the floor); resolves with per-delta latencies, the delta and delta frame counts and the time to `done`. */
async function abcRun(abc: ImServer, content: string, session: string): Promise<{ latencies: number[]; deltas: number; frames: number; ms: number }> {
  const started = performance.now();
  const ws = new WebSocket(`${abc.http.replace('http', 'ws')}/v1/im`);
  await new Promise((r) => ws.once('open', r));
  ws.send(JSON.stringify({ type: 'hello', ts: Date.now(), api_key: abc.key, user_id: 'bench' }));
  ws.send(JSON.stringify({ type: 'agent_invoke', ts: Date.now(), session_id: session, agent_id: 'bench', message: { role: 'user', content } }));
  const latencies: number[] = [];
  let deltas = 0;
  let frames = 0;
  await new Promise<void>((resolve, reject) =>
    ws.on('message', (data) => {
      const frame = JSON.parse(data.toString());
      if (frame.type === 'delta') {
        const pieces = latenciesOf(frame.text);
        deltas += pieces.length;
        frames++;
        latencies.push(...pieces);
      } else if (frame.type === 'done') resolve();
      else if (frame.type === 'error') reject(new Error(frame.message));
    }),
  );
  const ms = performance.now() - started;
  ws.close();
  return { latencies, deltas, frames, ms };
}

/** Baseline: `concurrency` clients, each sent `perRun` deltas straight over ws as fast as it takes them. */
async function directThroughput(concurrency: number, perRun: number): Promise<Round> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise((r) => wss.once('listening', r));
  wss.on('connection', async (socket) => {
    for (let i = 0; i < perRun; i++) {
      socket.send(JSON.stringify({ type: 'delta', ts: Date.now(), session_id: 'sess', run_id: 'run', cursor: String(i), text: `${performance.now()} ` }));
      if (socket.bufferedAmount > 1 << 20) await new Promise((r) => setTimeout(r, 1));
    }
    socket.send(JSON.stringify({ type: 'done' }));
  });
  const port = (wss.address() as AddressInfo).port;
  const start = performance.now();
  const counts = await Promise.all(
    Array.from({ length: concurrency }, async () => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}`);
      let n = 0;
      await new Promise<void>((resolve) =>
        ws.on('message', (data) => {
          const frame = JSON.parse(data.toString());
          if (frame.type === 'delta') n += latenciesOf(frame.text).length;
          else resolve();
        }),
      );
      ws.close();
      return n;
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  wss.close();
  const deltas = counts.reduce((a, b) => a + b, 0);
  return { deltas, frames: deltas, times: [], seconds };
}

const perRunOf = (concurrency: number) => Math.max(50, Math.floor(THROUGHPUT_DELTAS / concurrency));

/** `concurrency` IM runs at once through `abc` (or the floor), each of `content`'s deltas. */
async function runsAtOnce(abc: ImServer, concurrency: number, content: string): Promise<Round> {
  const start = performance.now();
  const tag = `${concurrency}_${Date.now()}_${Math.random().toString(36).slice(2, 8)}`;
  const results = await Promise.all(Array.from({ length: concurrency }, (_, i) => abcRun(abc, content, `sess_${tag}_${i}`)));
  const seconds = (performance.now() - start) / 1000;
  const sum = (f: (r: (typeof results)[number]) => number) => results.reduce((n, r) => n + f(r), 0);
  return { deltas: sum((r) => r.deltas), frames: sum((r) => r.frames), times: results.map((r) => r.ms), seconds };
}

/** `n` IM runs of 5 deltas each, `concurrency` at a time, through a bench agent of their own. */
export async function imRuns(abc: AbcProcess, n: number, concurrency: number): Promise<void> {
  const agent = await startAgent();
  try {
    await fetch(`${abc.http}/v1/agents/register`, {
      method: 'POST',
      headers: { authorization: `Bearer ${abc.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ agent_id: 'bench', name: 'Bench', endpoint: `http://127.0.0.1:${(agent.address() as AddressInfo).port}` }),
    });
    await loadCalls(n, concurrency, (i) => abcRun(abc, 'burst:5', `sess_im_${i}_${Date.now()}`));
  } finally {
    agent.closeAllConnections();
    agent.close();
  }
}

async function appendRates(url: string): Promise<{ perEvent: number; grouped: number; copy: number; commitP50: number }> {
  const orm = await createOrm({ url, poolMax: 4 });
  const em = () => orm.em.fork();
  const newRun = async (id: string) => {
    await em().execute("INSERT INTO sessions (session_id, user_id, tenant_id) VALUES (?, 'bench', 'default') ON CONFLICT DO NOTHING", [`s_${id}`]);
    // Leased far ahead, so the live core's recovery sweep leaves these synthetic runs alone.
    await em().execute(
      "INSERT INTO runs (run_id, session_id, tenant_id, root_agent_id, status, trace_id, lease_owner, lease_until) VALUES (?, ?, 'default', 'bench', 'RUNNING', 't', 'bench', now() + interval '1 day')",
      [id, `s_${id}`],
    );
  };
  // A state event: the log stores each one as it was written (deltas that queue up are joined).
  const type = 'agent_state';
  const payload = { state: 'an ordinary state of a streamed answer' };

  await newRun('r_single');
  let t = performance.now();
  for (let i = 0; i < APPENDS; i++) await em().transactional((tx) => appendEvents(tx, 'r_single', [{ type, payload }]));
  const perEvent = APPENDS / ((performance.now() - t) / 1000);

  await newRun('r_group');
  const writer = new EventWriter(new EventAppender(poolOf(orm)), 'r_group');
  t = performance.now();
  for (let i = 0; i < APPENDS; i++) writer.push({ type, payload });
  await writer.flush();
  const grouped = APPENDS / ((performance.now() - t) / 1000);

  await newRun('r_copy');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const rows = Array.from({ length: APPENDS }, (_, i) => `evt_copy_${i}\tr_copy\ts_r_copy\t${i + 1}\t${Date.now()}\t${type}\t${JSON.stringify(payload)}\n`);
  t = performance.now();
  await pipeline(Readable.from(rows), client.query(copyFrom('COPY events (event_id, run_id, session_id, seq, ts, type, payload) FROM STDIN')));
  const copy = APPENDS / ((performance.now() - t) / 1000);
  // The floor of a durable delta: one single-row INSERT, committed, alone.
  await client.query('CREATE TABLE bench_commits (id bigserial PRIMARY KEY, payload jsonb)');
  const commits: number[] = [];
  for (let i = 0; i < 400; i++) {
    const start = performance.now();
    await client.query('INSERT INTO bench_commits (payload) VALUES ($1)', [payload]);
    commits.push(performance.now() - start);
  }
  commits.sort((a, b) => a - b);
  await client.end();
  await orm.close();
  return { perEvent, grouped, copy, commitP50: percentile(commits, 50) };
}

export async function fanout(): Promise<void> {
  const db = await benchDatabase('abc_bench');
  const abc = await startAbc(db.url);
  const agent = await startAgent();
  const stops: (() => void)[] = [];
  try {
    const agentUrl = `http://127.0.0.1:${(agent.address() as AddressInfo).port}`;
    await fetch(`${abc.http}/v1/agents/register`, {
      method: 'POST',
      headers: { authorization: `Bearer ${abc.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ agent_id: 'bench', name: 'Bench', endpoint: agentUrl }),
    });
    await abcRun(abc, 'paced:20', `sess_warm_${Date.now()}`); // warm-up
    const startFloor = async (...mode: string[]): Promise<ImServer> => {
      const child = await startChild(['--import', 'tsx', 'bench/im-floor.ts', db.url, agentUrl, ...mode], (line) => (line.startsWith('http') ? line : undefined));
      stops.push(child.stop);
      const server = { http: child.url, key: '' };
      await loadCalls(20, 4, (i) => abcRun(server, 'paced:20', `warm_${mode.join('')}_${i}`));
      return server;
    };
    const floor = await startFloor();
    const records = await startFloor('records');

    const direct = (await directLatencies()).sort((a, b) => a - b);
    const through = (await abcRun(abc, `paced:${LATENCY_DELTAS}`, `sess_lat_${Date.now()}`)).latencies.sort((a, b) => a - b);
    const d50 = percentile(direct, 50);
    const d99 = percentile(direct, 99);
    const a50 = percentile(through, 50);
    const a99 = percentile(through, 99);
    const least = (await abcRun(floor, `paced:${LATENCY_DELTAS}`, 'floor_lat')).latencies.sort((a, b) => a - b);
    const f50 = percentile(least, 50);
    const f99 = percentile(least, 99);
    console.log(`\n## fanout: agent -> ABC -> WebSocket (${LATENCY_DELTAS} deltas, one every ${PACE_MS} ms)`);
    console.log('| path | p50 ms | p99 ms |');
    console.log('|---|---|---|');
    console.log(`| direct (agent -> ws) | ${fmt(d50)} | ${fmt(d99)} |`);
    console.log(`| through ABC | ${fmt(a50)} | ${fmt(a99)} |`);
    console.log(`| through the floor (bench/im-floor) | ${fmt(f50)} | ${fmt(f99)} |`);
    console.log(`| added by ABC | ${fmt(a50 - d50)} | ${fmt(a99 - d99)} |`);
    console.log(`| added by the floor | ${fmt(f50 - d50)} | ${fmt(f99 - d99)} |`);
    console.log(`| ratio ABC / direct | ${fmt(a50 / d50, 1)}x | ${fmt(a99 / d99, 1)}x |`);
    record({ bench: 'fanout', name: 'delta added latency p50, floor', value: f50 - d50, unit: 'ms', against: 'agent -> ws direct' });
    record({ bench: 'fanout', name: 'delta added latency p99, floor', value: f99 - d99, unit: 'ms', against: 'agent -> ws direct' });

    record({ bench: 'fanout', name: 'delta added latency p50', value: a50 - d50, unit: 'ms', ratio: a50 / d50, against: 'agent -> ws direct', goal: '<= 0.5 ms' });
    record({ bench: 'fanout', name: 'delta added latency p99', value: a99 - d99, unit: 'ms', ratio: a99 / d99, against: 'agent -> ws direct', goal: '<= 3 ms' });

    console.log(`\n## fanout: deltas per second (${THROUGHPUT_DELTAS} deltas, unpaced, per round; ${ROUNDS} rounds per side, taken in turn after an untimed one), vs the same deltas written straight to ws`);
    console.log('A delta frame may carry several of the agent\'s deltas (those that queued behind their run\'s commit); each is counted. The direct baseline sends each delta in a frame of its own. A side\'s figure is all its deltas over all its rounds\' time.');
    console.log('The records floor writes the rows ABC leaves for a run (session, run, messages, numbered events) in ABC\'s tables.');
    console.log('| concurrent runs | through ABC | ABC\'s rounds | floor (bench/im-floor) | records floor | direct ws | ABC / direct | floor / direct | ABC / floor | ABC / records floor | deltas per frame, ABC / floor |');
    console.log('|---|---|---|---|---|---|---|---|---|---|---|');
    for (const c of [1, 10, 100]) {
      const [directRounds, abcRounds, floorRounds, recordsRounds] = await warmRounds([
        () => directThroughput(c, perRunOf(c)),
        ...[abc, floor, records].map((side) => () => runsAtOnce(side, c, `burst:${perRunOf(c)}`)),
      ]);
      const direct = rateOf(directRounds!).rate;
      const abcTp = rateOf(abcRounds!);
      const floorTp = rateOf(floorRounds!);
      const through = abcTp.rate;
      const least = floorTp.rate;
      const kept = rateOf(recordsRounds!).rate;
      console.log(`| ${c} | ${fmt(through, 0)} | ${fmt(abcTp.slowest, 0)}–${fmt(abcTp.fastest, 0)} | ${fmt(least, 0)} | ${fmt(kept, 0)} | ${fmt(direct, 0)} | ${fmt(through / direct)} | ${fmt(least / direct)} | ${fmt(through / least)} | ${fmt(through / kept)} | ${fmt(abcTp.perFrame, 1)} / ${fmt(floorTp.perFrame, 1)} |`);
      record({ bench: 'fanout', name: `deltas per frame, ${c} runs`, value: abcTp.perFrame, unit: 'deltas/frame' });
      record({ bench: 'fanout', name: `deltas per frame, ${c} runs, floor`, value: floorTp.perFrame, unit: 'deltas/frame' });
      record({ bench: 'fanout', name: `deltas per second, ${c} runs`, value: through, unit: 'deltas/s', ratio: through / direct, against: 'ws direct', goal: c === 100 ? '>= 25,000 and >= 0.25x' : undefined });
      record({ bench: 'fanout', name: `deltas per second, ${c} runs, slowest round`, value: abcTp.slowest, unit: 'deltas/s' });
      record({ bench: 'fanout', name: `deltas per second, ${c} runs, fastest round`, value: abcTp.fastest, unit: 'deltas/s' });
      record({ bench: 'fanout', name: `deltas per second, ${c} runs, floor`, value: least, unit: 'deltas/s', ratio: least / direct, against: 'ws direct' });
      record({ bench: 'fanout', name: `deltas per second, ${c} runs, ABC vs floor`, value: through, unit: 'deltas/s', ratio: through / least, against: 'IM floor (bench/im-floor.ts)' });
      record({ bench: 'fanout', name: `deltas per second, ${c} runs, records floor`, value: kept, unit: 'deltas/s', ratio: kept / direct, against: 'ws direct' });
      record({ bench: 'fanout', name: `deltas per second, ${c} runs, ABC vs records floor`, value: through, unit: 'deltas/s', ratio: through / kept, against: 'IM records floor (bench/im-floor.ts records)' });
    }

    console.log(`\n## fanout: concurrent IM runs of ${SWEEP_DELTAS} deltas, one every ${PACE_MS} ms (connect, hello, invoke, stream, done; ${ROUNDS} rounds per side, taken in turn after an untimed one)`);
    console.log('Time to done is over every run of a side\'s rounds; "ABC\'s rounds" are the p50s of its rounds. The records floor writes the rows ABC leaves for a run (session, run, messages, numbered events) in ABC\'s tables.');
    console.log('| concurrent runs | time to done p50 ms | p99 ms | ABC\'s rounds p50 ms | deltas/s | floor p50 ms | floor p99 ms | floor deltas/s | ABC / floor p50 | records floor p50 ms | ABC / records floor p50 |');
    console.log('|---|---|---|---|---|---|---|---|---|---|---|');
    let alone = NaN;
    for (const c of [1, 10, 100, 200]) {
      const [abcRounds, floorRounds, recordsRounds] = await warmRounds([abc, floor, records].map((side) => () => runsAtOnce(side, c, `paced:${SWEEP_DELTAS}`)));
      const ms = timesOf(abcRounds!);
      const least = timesOf(floorRounds!);
      const r = { p50: percentile(ms, 50), p99: percentile(ms, 99), rate: rateOf(abcRounds!).rate };
      const f = { p50: percentile(least, 50), p99: percentile(least, 99), rate: rateOf(floorRounds!).rate };
      const kept = percentile(timesOf(recordsRounds!), 50);
      const each = abcRounds!.map((round) => percentile([...round.times].sort((a, b) => a - b), 50));
      if (c === 1) alone = r.p50;
      console.log(`| ${c} | ${fmt(r.p50, 0)} | ${fmt(r.p99, 0)} | ${fmt(Math.min(...each), 0)}–${fmt(Math.max(...each), 0)} | ${fmt(r.rate, 0)} | ${fmt(f.p50, 0)} | ${fmt(f.p99, 0)} | ${fmt(f.rate, 0)} | ${fmt(r.p50 / f.p50)} | ${fmt(kept, 0)} | ${fmt(r.p50 / kept)} |`);
      record({ bench: 'fanout', name: `IM runs, ${c} concurrent, floor time to done p50`, value: f.p50, unit: 'ms' });
      record({ bench: 'fanout', name: `IM runs, ${c} concurrent, time to done p50 vs floor`, value: r.p50, unit: 'ms', ratio: r.p50 / f.p50, against: 'IM floor (bench/im-floor.ts)' });
      record({ bench: 'fanout', name: `IM runs, ${c} concurrent, records floor time to done p50`, value: kept, unit: 'ms' });
      record({ bench: 'fanout', name: `IM runs, ${c} concurrent, time to done p50 vs records floor`, value: r.p50, unit: 'ms', ratio: r.p50 / kept, against: 'IM records floor (bench/im-floor.ts records)' });
      record({ bench: 'fanout', name: `IM runs, ${c} concurrent, time to done p50`, value: r.p50, unit: 'ms', ratio: r.p50 / alone, against: 'one run alone', goal: c === 200 ? '<= 300 ms' : undefined });
      record({ bench: 'fanout', name: `IM runs, ${c} concurrent, time to done p99`, value: r.p99, unit: 'ms' });
      record({ bench: 'fanout', name: `IM runs, ${c} concurrent, deltas per second`, value: r.rate, unit: 'deltas/s' });
    }

    const rates = await appendRates(db.url);
    console.log(`\n## event log: appends per second (${APPENDS} events)`);
    console.log('| method | events/s | vs COPY |');
    console.log('|---|---|---|');
    console.log(`| raw COPY (baseline) | ${fmt(rates.copy, 0)} | 1.00 |`);
    console.log(`| appendEvents, one commit per event | ${fmt(rates.perEvent, 0)} | ${fmt(rates.perEvent / rates.copy)} |`);
    console.log(`| EventWriter group commit | ${fmt(rates.grouped, 0)} | ${fmt(rates.grouped / rates.copy)} |`);
    console.log(`\nThe floor of a durable delta on this machine: one single-row INSERT committed alone takes ${fmt(rates.commitP50)} ms p50; ABC adds ${fmt(a50 - d50)} ms p50 to a delta (${fmt((a50 - d50) / rates.commitP50, 1)}x that commit).`);
    record({ bench: 'fanout', name: 'durable commit floor p50 (single-row INSERT)', value: rates.commitP50, unit: 'ms' });
    record({ bench: 'fanout', name: 'delta added latency p50 vs the commit floor', value: a50 - d50, unit: 'ms', ratio: (a50 - d50) / rates.commitP50, against: 'one single-row INSERT commit' });
  } finally {
    for (const stop of stops) stop();
    agent.close();
    await abc.stop();
    await db.close();
  }
}
