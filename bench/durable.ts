// bench/durable: ABC's contract execution side by side with two durable-execution
// peers, on one embedded PostgreSQL in the same run (each in its own database):
// - DBOS (@dbos-inc/dbos-sdk): an 8-step workflow;
// - LangGraph (@langchain/langgraph + PostgresSaver): an 8-node graph, checkpointed
//   before each next node (durability "sync");
// each step runs the pack's own analyze_portfolio units (bench/portfolio-steps.ts).
// Reported: submit-to-done p50/p99 at c=1 and write transactions per unit (the
// cluster's transaction ids consumed), one side at a time, the others idle;
// then completed per second at c=16, in rounds the sides take in turn, so that
// a machine whose speed drifts slows them alike. Beside them, the floor of
// ABC's records (bench/records-floor.ts: one contract's rows written straight,
// in DBOS's number of commits) and the floor of its path (bench/contract-floor.ts:
// HTTP -> gRPC, the same eight units, the records in ABC's three commits, and
// nothing else). Then an approval round trip against a LangGraph
// interrupt()/resume, with the side effects each re-executes (both timed after
// as many warm-up round trips).
import { writeFile, mkdtemp } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import WebSocket from 'ws';
import { ensureDatabase } from '../src/store/database.js';
import { benchDatabase, fmt, importSamplePortfolios, inTurn, loadCalls, percentile, record, settle, startAbc, startPathFloor, submitSync, type AbcProcess } from './lib.js';
import { importPeer } from './peers.js';
import { packDbOver, steps, type Outputs } from './portfolio-steps.js';
import { ABC_COMMITS, FLOOR_COMMITS, lastContract, recordsFloor } from './records-floor.js';

const LATENCY_RUNS = Number(process.env.BENCH_LATENCY_RUNS ?? 60);
/** Runs per side in each round at c=16; the sides take their rounds in turn. */
const THROUGHPUT_RUNS = Number(process.env.BENCH_THROUGHPUT_RUNS ?? 160);
const THROUGHPUT_ROUNDS = Number(process.env.BENCH_THROUGHPUT_ROUNDS ?? 3);
const WARMUP_RUNS = Number(process.env.BENCH_WARMUP_RUNS ?? 160);
const APPROVALS = Number(process.env.BENCH_APPROVALS ?? 30);
/** Round trips run before the timed ones on each side, as every other latency here is measured warm. */
const APPROVAL_WARMUP = Number(process.env.BENCH_APPROVAL_WARMUP ?? 30);
const CONCURRENCY = 16;

interface Side {
  name: string;
  p50: number;
  p99: number;
  perSecond: number;
  /** The slowest and fastest of its rounds at c=16. */
  rounds: [number, number];
  /** Write transactions per unit of work (one contract, one workflow, one graph run). */
  transactions: number;
}

/** One way of running the work: a unit is one contract, one workflow or one graph run. */
interface Runner {
  name: string;
  unit: () => Promise<unknown>;
  stop(): Promise<void>;
}

/** The cluster's next transaction id: each write transaction consumes one. */
async function nextXid(admin: pg.Pool): Promise<number> {
  const { rows } = await admin.query<{ xid: string }>('SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS xid');
  return Number(rows[0]!.xid);
}

/** Warms a runner up, at c=1 and then at c=16: every figure is of a server's steady state, after its code is compiled. */
async function warm(runner: Runner): Promise<void> {
  for (let i = 0; i < 5; i++) await runner.unit();
  await loadCalls(WARMUP_RUNS, CONCURRENCY, runner.unit);
}

/** Latency at c=1 and write transactions per unit; nothing else may write to the cluster meanwhile. */
async function latency(runner: Runner, admin: pg.Pool): Promise<Pick<Side, 'name' | 'p50' | 'p99' | 'transactions'>> {
  await warm(runner);
  const before = await nextXid(admin);
  const serial = await loadCalls(LATENCY_RUNS, 1, runner.unit);
  const transactions = ((await nextXid(admin)) - before - 1) / LATENCY_RUNS;
  const sorted = serial.latencies.sort((a, b) => a - b);
  return { name: runner.name, p50: percentile(sorted, 50), p99: percentile(sorted, 99), transactions };
}

/**
 * Completed per second at c=16, in rounds that the runners take in turn: a
 * machine whose speed drifts over a run slows every side alike, so the ratios
 * hold. The cluster settles once before them, not between rounds: a
 * checkpoint before each round would make every round pay the full-page
 * images of its first writes after it. A side's figure is all its runs over
 * all its rounds' time.
 */
async function throughput(runners: Runner[], urls: string[]): Promise<Pick<Side, 'perSecond' | 'rounds'>[]> {
  for (const url of urls) await settle(url);
  const rates = await inTurn(
    runners.map((runner) => async () => {
      // Untimed: a unit per client first, so that each side's pools have
      // their connections again (an idle pool closes them) before the clock.
      await loadCalls(CONCURRENCY, CONCURRENCY, runner.unit);
      return (await loadCalls(THROUGHPUT_RUNS, CONCURRENCY, runner.unit)).rps;
    }),
    THROUGHPUT_ROUNDS,
  );
  return rates.map((rps) => ({ perSecond: (THROUGHPUT_RUNS * rps.length) / rps.reduce((t, r) => t + THROUGHPUT_RUNS / r, 0), rounds: [Math.min(...rps), Math.max(...rps)] }));
}

function databaseOn(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

function abcRunner(abc: AbcProcess): Runner {
  const headers = { authorization: `Bearer ${abc.key}`, 'content-type': 'application/json' };
  return { name: 'ABC contract (analyze_portfolio, sync)', unit: () => submitSync(abc.http, headers), stop: () => abc.stop() };
}

/** The floor of a contract's path (bench/contract-floor.ts), in a process of its own like ABC. */
async function pathFloorRunner(url: string, ticket: string): Promise<Runner> {
  const floor = await startPathFloor(url, ticket);
  return {
    name: `Floor: HTTP -> gRPC, the 8 units, the records in ${ABC_COMMITS} commits`,
    unit: () => submitSync(floor.url, { 'content-type': 'application/json' }),
    stop: async () => floor.stop(),
  };
}

/** The floor of ABC's records: the rows of a contract it finished, copied straight into its database. */
async function floorRunner(url: string, ticket: string): Promise<Runner> {
  const floor = await recordsFloor(url, ticket, CONCURRENCY);
  let copies = 0;
  return { name: `Floor: one contract's ${floor.rows} records, ${FLOOR_COMMITS} commits, no work`, unit: () => floor.run(copies++), stop: () => floor.end() };
}

/* eslint-disable @typescript-eslint/no-explicit-any -- the peers are loaded at run time, untyped */
/** A pool of the peers' own pg, whose idle connections may end quietly when the cluster stops. */
async function peerPool(url: string): Promise<any> {
  const { default: peerPg } = await importPeer<any>('pg');
  const pool = new peerPg.Pool({ connectionString: url, max: CONCURRENCY + 4 });
  pool.on('error', () => {});
  return pool;
}

async function dbosRunner(url: string, work: ReturnType<typeof steps>): Promise<Runner> {
  const { DBOS } = await importPeer<any>('@dbos-inc/dbos-sdk');
  const pool = await peerPool(url);
  DBOS.setConfig({ name: 'abc-bench', systemDatabaseUrl: url, systemDatabasePool: pool, logLevel: 'error' });
  const workflow = DBOS.registerWorkflow(
    async () => {
      const outputs: Outputs = {};
      for (const step of work) outputs[step.id] = await DBOS.runStep(() => step.run(outputs), { name: step.id });
      return (outputs.report as { result: unknown }).result;
    },
    { name: 'analyzePortfolio' },
  );
  await DBOS.launch();
  return { name: 'DBOS 8-step workflow', unit: () => workflow(), stop: async () => (await DBOS.shutdown(), await pool.end()) };
}

async function langGraph(url: string): Promise<{ lg: any; saver: any }> {
  const lg = await importPeer<any>('@langchain/langgraph');
  const { PostgresSaver } = await importPeer<any>('@langchain/langgraph-checkpoint-postgres');
  const saver = new PostgresSaver(await peerPool(url));
  await saver.setup();
  return { lg, saver };
}

let threads = 0;
const thread = () => ({ configurable: { thread_id: `t${process.pid}_${++threads}` }, durability: 'sync' as const });

function langGraphRunner(lg: any, saver: any, work: ReturnType<typeof steps>): Runner {
  const State = lg.Annotation.Root({ outputs: lg.Annotation({ reducer: (a: Outputs, b: Outputs) => ({ ...a, ...b }), default: () => ({}) }) });
  let graph = new lg.StateGraph(State);
  for (const step of work) graph = graph.addNode(step.id, async (state: { outputs: Outputs }) => ({ outputs: { [step.id]: await step.run(state.outputs) } }));
  graph = graph.addEdge(lg.START, work[0]!.id);
  for (let i = 1; i < work.length; i++) graph = graph.addEdge(work[i - 1]!.id, work[i]!.id);
  const app = graph.addEdge(work.at(-1)!.id, lg.END).compile({ checkpointer: saver });
  return { name: 'LangGraph 8-node graph, PostgresSaver', unit: () => app.invoke({ outputs: {} }, thread()), stop: async () => {} };
}

interface ApprovalSide {
  name: string;
  p50: number;
  p99: number;
  /** Times the code before the approval ran, per run (1 = never again). */
  before: number;
  /** Times the approved action ran, per run. */
  effects: number;
}

/** LangGraph: a node does work, interrupts for approval, then acts; resumed with Command({resume}). */
async function langGraphApprovals(lg: any, saver: any): Promise<ApprovalSide> {
  let before = 0;
  let effects = 0;
  const State = lg.Annotation.Root({ done: lg.Annotation() });
  const app = new lg.StateGraph(State)
    .addNode('transfer', async () => {
      before++;
      const approved = lg.interrupt({ tool: 'payments.transfer', amount: 500 });
      if (approved) effects++;
      return { done: Boolean(approved) };
    })
    .addEdge(lg.START, 'transfer')
    .addEdge('transfer', lg.END)
    .compile({ checkpointer: saver });
  const latencies: number[] = [];
  for (let i = 0; i < APPROVAL_WARMUP + APPROVALS; i++) {
    if (i === APPROVAL_WARMUP) before = effects = 0;
    const config = thread();
    const t = performance.now();
    await app.invoke({ done: false }, config);
    const out = await app.invoke(new lg.Command({ resume: true }), config);
    if (i >= APPROVAL_WARMUP) latencies.push(performance.now() - t);
    if (!out.done) throw new Error('the graph did not finish after its resume');
  }
  latencies.sort((a, b) => a - b);
  return { name: 'LangGraph interrupt() / Command({resume})', p50: percentile(latencies, 50), p99: percentile(latencies, 99), before: before / APPROVALS, effects: effects / APPROVALS };
}
/* eslint-enable @typescript-eslint/no-explicit-any */

/**
 * ABC: an agent, invoked over IM, calls a tool that policy holds for approval
 * and waits; a user approves over the API; the tool runs and the agent ends.
 * Counted: the agent's invocations (its code before the call) and the tool's runs.
 */
async function abcApprovals(abc: AbcProcess, webhookUrl: string, calls: () => number): Promise<ApprovalSide> {
  const headers = { authorization: `Bearer ${abc.key}`, 'content-type': 'application/json' };
  const registered = await fetch(`${abc.http}/v1/tools/register`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ name: 'payments.transfer', kind: 'http', endpoint: webhookUrl, side_effect: true }),
  });
  if (!registered.ok) throw new Error(`tool registration answered ${registered.status}`);
  let invocations = 0;
  let calledBefore = 0;
  const agent = http.createServer(async (req, res) => {
    if (req.url === '/health') return res.end('{"status":"healthy"}');
    for await (const _ of req);
    invocations++;
    const auth = { authorization: `Bearer ${req.headers['x-abc-run-token']}`, 'content-type': 'application/json' };
    const runId = String(req.headers['x-run-id']);
    let call = (await (await fetch(`${abc.http}/v1/tools/payments.transfer:invoke`, { method: 'POST', headers: auth, body: JSON.stringify({ run_id: runId, args: { amount: 500 } }) })).json()) as { status: string; tool_call_id: string };
    while (!['succeeded', 'failed'].includes(call.status)) call = (await (await fetch(`${abc.http}/v1/tool_calls/${call.tool_call_id}:wait?timeout_ms=5000`, { method: 'POST', headers: auth })).json()) as typeof call;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(`event: delta\ndata: {"text":"${call.status}"}\n\nevent: done\ndata: {"usage":{}}\n\n`);
  });
  await new Promise<void>((r) => agent.listen(0, '127.0.0.1', r));
  const latencies: number[] = [];
  try {
    await fetch(`${abc.http}/v1/agents/register`, { method: 'POST', headers, body: JSON.stringify({ agent_id: 'payer', name: 'Payer', endpoint: `http://127.0.0.1:${(agent.address() as AddressInfo).port}` }) });
    for (let i = 0; i < APPROVAL_WARMUP + APPROVALS; i++) {
      if (i === APPROVAL_WARMUP) [invocations, calledBefore] = [0, calls()];
      const ws = new WebSocket(`${abc.http.replace('http', 'ws')}/v1/im`);
      await new Promise((r) => ws.once('open', r));
      const t = performance.now();
      const done = new Promise<string>((resolve, reject) =>
        ws.on('message', async (data) => {
          const frame = JSON.parse(data.toString()) as { type: string; approval_id?: string; text?: string; message?: string };
          if (frame.type === 'approval_required') {
            const decided = await fetch(`${abc.http}/v1/approvals/${frame.approval_id}:decide`, { method: 'POST', headers: { ...headers, 'x-user-id': 'bench' }, body: JSON.stringify({ decision: 'approve' }) });
            if (!decided.ok) reject(new Error(`the decision answered ${decided.status}: ${await decided.text()}`));
          } else if (frame.type === 'delta') resolve(frame.text ?? '');
          else if (frame.type === 'error') reject(new Error(frame.message));
        }),
      );
      ws.send(JSON.stringify({ type: 'hello', api_key: abc.key, user_id: 'bench' }));
      ws.send(JSON.stringify({ type: 'agent_invoke', session_id: `sess_approval_${Date.now()}_${i}`, agent_id: 'payer', message: { role: 'user', content: 'pay' } }));
      const outcome = await done;
      if (i >= APPROVAL_WARMUP) latencies.push(performance.now() - t);
      ws.close();
      if (outcome !== 'succeeded') throw new Error(`the approved call ended ${outcome}`);
    }
  } finally {
    agent.closeAllConnections();
    agent.close();
  }
  latencies.sort((a, b) => a - b);
  return { name: 'ABC agent tool call held for approval, approved, run', p50: percentile(latencies, 50), p99: percentile(latencies, 99), before: invocations / APPROVALS, effects: (calls() - calledBefore) / APPROVALS };
}

export async function durable(): Promise<void> {
  const db = await benchDatabase('bench_durable');
  const admin = new pg.Pool({ connectionString: databaseOn(db.url, 'postgres'), max: 2 });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'abc-bench-durable-'));
  const policyFile = path.join(dir, 'policy.json');
  await writeFile(policyFile, JSON.stringify({ version: 1, default: 'allow', rules: [{ id: 'transfers', tools: ['payments.transfer'], decision: 'require_approval' }] }));
  let webhookCalls = 0;
  const webhook = http.createServer((req, res) => {
    req.resume().on('end', () => {
      webhookCalls++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
  });
  await new Promise<void>((r) => webhook.listen(0, '127.0.0.1', r));
  const stepsPool = new pg.Pool({ connectionString: db.url, max: CONCURRENCY });
  for (const pool of [admin, stepsPool]) pool.on('error', () => {}); // idle connections end with the cluster
  const work = steps(packDbOver(stepsPool));
  const abcEnv = { ABC_CONTRACT_WORKERS: '4', ABC_POLICY_FILE: policyFile };
  const [dbosUrl, langGraphUrl] = [databaseOn(db.url, 'bench_dbos'), databaseOn(db.url, 'bench_langgraph')];
  const started: Runner[] = [];
  const approvals: ApprovalSide[] = [];
  let sides: Side[] = [];
  try {
    // Latency and transactions, one side at a time, ABC first. ABC then stays
    // up, idle: an idle core writes nothing (no transaction id in 20 s), so
    // the peers' counts hold only their own, and ABC keeps its compiled code.
    const abc = await startAbc(db.url, abcEnv);
    const abcSide = abcRunner(abc);
    started.push(abcSide);
    await importSamplePortfolios(db.url);
    const abcLatency = await latency(abcSide, admin);
    // Both floors copy the contract ABC completed last, not each other's copies.
    const template = await lastContract(db.url);
    /** Starts a side once the cluster has settled after the last one's load (autovacuum, dirty pages). */
    const begin = async (previous: string, start: () => Promise<Runner>): Promise<Runner> => {
      await settle(previous);
      const runner = await start();
      started.push(runner);
      return runner;
    };
    const floor = await begin(db.url, () => floorRunner(db.url, template));
    const floorLatency = await latency(floor, admin);
    const pathFloor = await begin(db.url, () => pathFloorRunner(db.url, template));
    const pathLatency = await latency(pathFloor, admin);
    for (const name of ['bench_dbos', 'bench_langgraph']) await ensureDatabase(databaseOn(db.url, 'postgres'), name);
    const dbos = await begin(db.url, () => dbosRunner(dbosUrl, work));
    const dbosLatency = await latency(dbos, admin);
    const { lg, saver } = await langGraph(langGraphUrl);
    const graph = await begin(dbosUrl, async () => ({ ...langGraphRunner(lg, saver, work), stop: () => saver.end() }));
    const graphLatency = await latency(graph, admin);

    // Completed per second: every side in turn.
    const rates = await throughput([abcSide, dbos, graph, floor, pathFloor], [db.url, dbosUrl, langGraphUrl]);
    sides = [abcLatency, dbosLatency, graphLatency, floorLatency, pathLatency].map((l, i) => ({ ...l, ...rates[i]! }));

    approvals.push(await abcApprovals(abc, `http://127.0.0.1:${(webhook.address() as AddressInfo).port}/hook`, () => webhookCalls));
    approvals.push(await langGraphApprovals(lg, saver));
  } finally {
    for (const runner of started.reverse()) await runner.stop().catch(() => {});
    webhook.close();
    await stepsPool.end();
    await admin.end();
    await db.close();
  }

  const [abcRow, dbos, , floor, pathFloor] = sides as [Side, Side, Side, Side, Side];
  console.log(`\n## durable execution: analyze_portfolio (8 units) side by side, one PostgreSQL (c=${CONCURRENCY}: ${THROUGHPUT_ROUNDS} rounds of ${THROUGHPUT_RUNS} per side, taken in turn)`);
  console.log(`| system | c=1 p50 ms | c=1 p99 ms | c=${CONCURRENCY} completed/s | its rounds | write transactions per run | p50 vs DBOS | completed/s vs DBOS |`);
  console.log('|---|---|---|---|---|---|---|---|');
  const row = (s: Side) =>
    console.log(`| ${s.name} | ${fmt(s.p50, 1)} | ${fmt(s.p99, 1)} | ${fmt(s.perSecond, 1)} | ${fmt(s.rounds[0], 1)}–${fmt(s.rounds[1], 1)} | ${fmt(s.transactions, 1)} | ${fmt(s.p50 / dbos.p50)}x | ${fmt(s.perSecond / dbos.perSecond)}x |`);
  for (const s of sides.slice(0, 3)) {
    row(s);
    const key = s === abcRow ? 'ABC' : s === dbos ? 'DBOS' : 'LangGraph';
    record({ bench: 'durable', name: `${key} c=1 p50`, value: s.p50, unit: 'ms', ratio: s.p50 / dbos.p50, against: 'DBOS', goal: s === abcRow ? '<= 1.0x' : undefined });
    record({ bench: 'durable', name: `${key} c=1 p99`, value: s.p99, unit: 'ms' });
    record({ bench: 'durable', name: `${key} c=${CONCURRENCY} completed per second`, value: s.perSecond, unit: 'runs/s', ratio: s.perSecond / dbos.perSecond, against: 'DBOS', goal: s === abcRow ? '>= 1.5x' : undefined });
    record({ bench: 'durable', name: `${key} write transactions per run`, value: s.transactions, unit: 'transactions' });
  }
  for (const [f, key, what] of [[floor, 'records floor', 'its records'], [pathFloor, 'path floor', 'its path']] as const) {
    row(f);
    console.log(`ABC against the floor of ${what}: c=1 p50 ${fmt(abcRow.p50 / f.p50)}x, completed/s ${fmt(abcRow.perSecond / f.perSecond)}x`);
    record({ bench: 'durable', name: `${key} c=1 p50`, value: f.p50, unit: 'ms', ratio: f.p50 / dbos.p50, against: 'DBOS' });
    record({ bench: 'durable', name: `${key} c=${CONCURRENCY} completed per second`, value: f.perSecond, unit: 'runs/s', ratio: f.perSecond / dbos.perSecond, against: 'DBOS' });
    record({ bench: 'durable', name: `ABC c=1 p50 against the ${key}`, value: abcRow.p50, unit: 'ms', ratio: abcRow.p50 / f.p50, against: key });
    record({ bench: 'durable', name: `ABC c=${CONCURRENCY} completed per second against the ${key}`, value: abcRow.perSecond, unit: 'runs/s', ratio: abcRow.perSecond / f.perSecond, against: key });
  }
  console.log('\n## durable execution: an approval round trip (no human wait), and what runs again');
  console.log('| system | p50 ms | p99 ms | code before the approval ran, per run | approved action ran, per run |');
  console.log('|---|---|---|---|---|');
  for (const a of approvals) {
    console.log(`| ${a.name} | ${fmt(a.p50, 1)} | ${fmt(a.p99, 1)} | ${fmt(a.before, 1)} | ${fmt(a.effects, 1)} |`);
    const key = a === approvals[0] ? 'ABC' : 'LangGraph';
    record({ bench: 'durable', name: `${key} approval round trip p50`, value: a.p50, unit: 'ms' });
    record({ bench: 'durable', name: `${key} code before the approval, runs per approval`, value: a.before, unit: 'runs' });
  }
}
