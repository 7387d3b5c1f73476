// bench/transitions: durable state transitions per second. Each transition is a
// move of a state machine through the one transition writer, committed with its
// records (seed 004's execution_transitions rows, events). Measured at
// concurrency 16 on one `abc serve`:
// - tool calls: an agent's calls of the built-in echo tool: the tool-call
//   machine's moves and the execution contract's recorded transitions, counted
//   from the committed rows;
// - run moves: IM runs started and finished (each run is created, runs, ends).
// The baseline is PostgreSQL itself: single-row UPDATE commits of a state
// column, at the same concurrency, on the same cluster; and the same commits
// each with a NOTIFY, as ABC's commits of events have. Two floors, with 16
// callers each keeping to a run of its own: the rows a call's moves keep,
// copied from one of ABC's calls and written straight in one commit per call
// (bench/call-floor.ts); and the same behind ABC's path, HTTP into Fastify on a
// gateway thread and one gRPC call to the main thread, with none of ABC's
// logic (bench/call-path-floor.ts), called as ABC is.
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { benchDatabase, fmt, loadCalls, record, startAbc, startChild } from './lib.js';
import { runToken } from './llm-proxy.js';
import { imRuns } from './fanout.js';
import { callFloor, lastCall } from './call-floor.js';

const CALLS = Number(process.env.BENCH_TRANSITION_CALLS ?? 2000);
const RUNS = Number(process.env.BENCH_TRANSITION_RUNS ?? 400);
const CONCURRENCY = 16;

export async function transitions(): Promise<void> {
  const db = await benchDatabase('bench_transitions');
  const abc = await startAbc(db.url);
  const sql = new pg.Pool({ connectionString: db.url, max: CONCURRENCY + 1 });
  const count = async (query: string) => Number((await sql.query<{ n: string }>(query)).rows[0]!.n);
  // One run whose agent makes 16 calls at once, and 16 runs making one call at a time each.
  const runs: Awaited<ReturnType<typeof runToken>>[] = [];
  for (let i = 0; i < CONCURRENCY; i++) runs.push(await runToken(abc));
  const run = runs[0]!;
  try {
    const call = async (i: number, r = run, base = abc.http) => {
      const res = await fetch(`${base}/v1/tools/echo:invoke`, {
        method: 'POST',
        headers: { authorization: `Bearer ${r.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ run_id: r.runId, args: { i } }),
      });
      const body = (await res.json()) as { status: string };
      if (body.status !== 'succeeded') throw new Error(`echo answered ${JSON.stringify(body)}`);
    };
    // Each of 16 callers keeps to a run of its own.
    const spread = (base: string, from: number) =>
      Promise.all(runs.map(async (r, k) => {
        for (let i = 0; i < CALLS / CONCURRENCY; i++) await call(from + k * CALLS + i, r, base);
      }));
    // The floor, first, while ABC is idle (the loads below leave PostgreSQL work behind them,
    // autovacuum among it): a state column moved by single-row UPDATE commits, after a warm-up.
    await sql.query('CREATE TABLE bench_states (id int PRIMARY KEY, state int NOT NULL)');
    await sql.query('INSERT INTO bench_states SELECT g, 0 FROM generate_series(1, 1000) g');
    await loadCalls(CALLS, CONCURRENCY, (i) => sql.query('UPDATE bench_states SET state = state + 1 WHERE id = $1', [(i % 1000) + 1]));
    const raw = await loadCalls(CALLS * 2, CONCURRENCY, (i) => sql.query('UPDATE bench_states SET state = state + 1 WHERE id = $1', [(i % 1000) + 1]));
    // The same commits, each with a NOTIFY, as every commit of ABC's events has: PostgreSQL
    // serialises notifying commits on one lock, so they share no WAL flush.
    const notified = await loadCalls(CALLS * 2, CONCURRENCY, (i) =>
      sql.query("WITH u AS (UPDATE bench_states SET state = state + 1 WHERE id = $1 RETURNING id) SELECT pg_notify('bench_states', id::text) FROM u", [(i % 1000) + 1]),
    );

    // A warm-up as the baseline's: as many calls, at the same concurrency (new connections and JIT settle first).
    await loadCalls(CALLS, CONCURRENCY, (i) => call(i + 1_000_000));
    // The tool-call machine's moves (each bumps the row's version) and seed 004's recorded transitions of its execution contract.
    const toolMoves = `SELECT (SELECT coalesce(sum(version), 0) FROM tool_calls) + (SELECT count(*) FROM execution_transitions t JOIN execution_contracts c USING (execution_id) WHERE c.action_type = 'tool_call') AS n`;
    const rateOf = async (load: () => Promise<unknown>) => {
      const before = await count(toolMoves);
      const started = performance.now();
      await load();
      const moves = (await count(toolMoves)) - before;
      return { rate: moves / ((performance.now() - started) / 1000), perCall: moves / CALLS };
    };
    const { rate: toolRate, perCall } = await rateOf(() => loadCalls(CALLS, CONCURRENCY, (i) => call(i + 1000)));
    const { rate: spreadRate } = await rateOf(() => spread(abc.http, 100_000));

    // The floors: the records of ABC's last call, copied.
    const template = await lastCall(db.url);
    const floor = await callFloor(db.url, template, CONCURRENCY);
    const targets = (await sql.query<{ run_id: string; session_id: string }>('SELECT run_id, session_id FROM runs WHERE run_id = ANY($1)', [runs.map((r) => r.runId)])).rows;
    const floorStarted = performance.now();
    await Promise.all(targets.map(async (t, k) => {
      for (let i = 0; i < CALLS / CONCURRENCY; i++) await floor.run(k * CALLS + i, { runId: t.run_id, sessionId: t.session_id });
    }));
    const floorRate = (CALLS * perCall) / ((performance.now() - floorStarted) / 1000);
    await floor.end();
    const pathFloor = await startChild(['--import', 'tsx', 'bench/call-path-floor.ts', db.url, template], (line) => (line.startsWith('http') ? line : undefined));
    let pathRate: number;
    try {
      await spread(pathFloor.url, 1_000_000); // a warm-up, as ABC's
      const started = performance.now();
      await spread(pathFloor.url, 2_000_000);
      pathRate = (CALLS * perCall) / ((performance.now() - started) / 1000);
    } finally {
      pathFloor.stop();
    }

    // Run moves: the run machine's transitions, as its events record them.
    const runMoves = "SELECT count(*) AS n FROM events WHERE type IN ('run_started', 'run_done')";
    const before = await count(runMoves);
    const t = performance.now();
    await imRuns(abc, RUNS, CONCURRENCY);
    const seconds = (performance.now() - t) / 1000;
    const runRate = ((await count(runMoves)) - before) / seconds;

    console.log(`\n## durable state transitions per second (concurrency ${CONCURRENCY})`);
    console.log('| what | transitions/s | vs raw UPDATE commits |');
    console.log('|---|---|---|');
    console.log(`| raw single-row UPDATE commits (baseline) | ${fmt(raw.rps, 0)} | 1.00 |`);
    console.log(`| the same, each with a NOTIFY | ${fmt(notified.rps, 0)} | ${fmt(notified.rps / raw.rps)} |`);
    console.log(`| tool calls of one run, 16 at once (${fmt(perCall, 1)} recorded moves each) | ${fmt(toolRate, 0)} | ${fmt(toolRate / raw.rps)} |`);
    console.log(`| tool calls of 16 runs, one at a time each | ${fmt(spreadRate, 0)} | ${fmt(spreadRate / raw.rps)} |`);
    console.log(`| the same calls' records, written straight (floor: ${floor.rows} rows in one commit per call) | ${fmt(floorRate, 0)} | ${fmt(floorRate / raw.rps)} |`);
    console.log(`| the same behind HTTP -> gRPC (path floor, called as ABC is) | ${fmt(pathRate, 0)} | ${fmt(pathRate / raw.rps)} |`);
    console.log(`| run moves (IM runs: created, done) | ${fmt(runRate, 0)} | ${fmt(runRate / raw.rps)} |`);
    console.log(`ABC's calls of 16 runs reach ${fmt(spreadRate / floorRate)}x the records floor and ${fmt(spreadRate / pathRate)}x the path floor.`);
    record({ bench: 'transitions', name: 'tool call transitions per second', value: toolRate, unit: 'transitions/s', ratio: toolRate / raw.rps, against: 'raw single-row UPDATE commits', goal: '>= 3,000' });
    record({ bench: 'transitions', name: 'tool call transitions per second, 16 runs', value: spreadRate, unit: 'transitions/s', ratio: spreadRate / raw.rps, against: 'raw single-row UPDATE commits', goal: '>= 3,000' });
    record({ bench: 'transitions', name: 'tool call records written straight, transitions per second', value: floorRate, unit: 'transitions/s', ratio: floorRate / raw.rps, against: 'raw single-row UPDATE commits', goal: '>= 3,000' });
    record({ bench: 'transitions', name: 'tool call records behind HTTP and gRPC (path floor), transitions per second', value: pathRate, unit: 'transitions/s', ratio: pathRate / raw.rps, against: 'raw single-row UPDATE commits', goal: '>= 3,000' });
    record({ bench: 'transitions', name: 'tool call transitions per second, 16 runs, against the records floor', value: spreadRate, unit: 'transitions/s', ratio: spreadRate / floorRate, against: 'the records floor' });
    record({ bench: 'transitions', name: 'tool call transitions per second, 16 runs, against the path floor', value: spreadRate, unit: 'transitions/s', ratio: spreadRate / pathRate, against: 'the path floor' });
    record({ bench: 'transitions', name: 'run transitions per second', value: runRate, unit: 'transitions/s', ratio: runRate / raw.rps, against: 'raw single-row UPDATE commits' });
    record({ bench: 'transitions', name: 'raw single-row UPDATE commits per second', value: raw.rps, unit: 'commits/s' });
    record({ bench: 'transitions', name: 'single-row UPDATE commits with a NOTIFY per second', value: notified.rps, unit: 'commits/s', ratio: notified.rps / raw.rps, against: 'raw single-row UPDATE commits' });
  } finally {
    for (const r of runs) r.close();
    await sql.end();
    await abc.stop();
    await db.close();
  }
}
