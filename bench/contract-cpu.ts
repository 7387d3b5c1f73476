// bench/contract-cpu: where a sync contract's CPU goes, against the floor of its
// path (bench/contract-floor.ts), for bench/durable's row at c=16. At c=16 this
// machine's cores are busy, so contracts per second follow CPU per contract.
// ABC and the floor take rounds of sync analyze_portfolio contracts at c=16 in
// turn, on one PostgreSQL; each round reads from /proc the CPU that the side's
// process spent, by thread (main, gateway, V8's helpers, the rest), and that
// PostgreSQL's processes spent, per contract. Linux only; PostgreSQL's share
// counts the processes of a cluster on this machine (the embedded one, or a
// local DATABASE_URL's), whatever else they serve meanwhile.
import { performance } from 'node:perf_hooks';
import { benchDatabase, fmt, importSamplePortfolios, loadCalls, record, settle, startAbc, startPathFloor, submitSync } from './lib.js';
import { postgresCpu, postgresCpuSince, procAvailable, THREAD_GROUPS, threadsCpu, type ThreadGroup } from './proc-cpu.js';
import { lastContract } from './records-floor.js';

/** Contracts per side in each round; the sides take their rounds in turn. */
const RUNS = Number(process.env.BENCH_CPU_RUNS ?? 480);
const ROUNDS = Number(process.env.BENCH_CPU_ROUNDS ?? 4);
const WARMUP = Number(process.env.BENCH_CPU_WARMUP ?? 300);
const CONCURRENCY = 16;

type Part = ThreadGroup | 'PostgreSQL';
const PARTS: Part[] = [...THREAD_GROUPS, 'PostgreSQL'];

interface Side {
  pid: number;
  unit: () => Promise<void>;
  /** CPU over all its rounds, ms. */
  cpu: Record<Part, number>;
  seconds: number;
}

const sideOf = (pid: number, unit: () => Promise<void>): Side => ({ pid, unit, cpu: Object.fromEntries(PARTS.map((p) => [p, 0])) as Record<Part, number>, seconds: 0 });

/** One round of `side`: its contracts at c=16, and the CPU they cost. */
async function round(side: Side): Promise<void> {
  const threads = threadsCpu(side.pid);
  const postgres = postgresCpu();
  const started = performance.now();
  await loadCalls(RUNS, CONCURRENCY, side.unit);
  side.seconds += (performance.now() - started) / 1000;
  const after = threadsCpu(side.pid);
  for (const group of THREAD_GROUPS) side.cpu[group] += after[group] - threads[group];
  side.cpu.PostgreSQL += postgresCpuSince(postgres);
}

export async function contractCpu(): Promise<void> {
  if (!procAvailable()) {
    console.log('\n## contract CPU: skipped, it reads /proc (Linux only)');
    return;
  }
  const db = await benchDatabase('bench_contract_cpu');
  const abc = await startAbc(db.url, { ABC_CONTRACT_WORKERS: '4' });
  let floor: Awaited<ReturnType<typeof startPathFloor>> | undefined;
  try {
    await importSamplePortfolios(db.url);
    const headers = { authorization: `Bearer ${abc.key}`, 'content-type': 'application/json' };
    const abcSide = sideOf(abc.child.pid!, () => submitSync(abc.http, headers));
    await loadCalls(WARMUP, CONCURRENCY, abcSide.unit);
    // The floor copies the records of the contract ABC completed last.
    const ticket = await lastContract(db.url);
    floor = await startPathFloor(db.url, ticket);
    const floorUrl = floor.url;
    const floorSide = sideOf(floor.pid, () => submitSync(floorUrl, { 'content-type': 'application/json' }));
    await loadCalls(WARMUP, CONCURRENCY, floorSide.unit);
    await settle(db.url);
    for (let r = 0; r < ROUNDS; r++) for (const side of r % 2 ? [floorSide, abcSide] : [abcSide, floorSide]) await round(side);
    report(abcSide, floorSide);
  } finally {
    floor?.stop();
    await abc.stop();
    await db.close();
  }
}

function report(abc: Side, floor: Side): void {
  const contracts = RUNS * ROUNDS;
  const per = (s: Side, p: Part) => s.cpu[p] / contracts;
  const inProcess = (s: Side) => THREAD_GROUPS.reduce((sum, g) => sum + per(s, g), 0);
  const total = (s: Side) => inProcess(s) + per(s, 'PostgreSQL');
  const rate = (s: Side) => contracts / s.seconds;
  console.log(`\n## contract CPU: a sync analyze_portfolio contract at c=${CONCURRENCY}, ABC against the floor of its path (${ROUNDS} rounds of ${RUNS} per side, taken in turn)`);
  console.log('| CPU per contract, ms | ABC | path floor | ABC / floor |');
  console.log('|---|---|---|---|');
  const row = (name: string, a: number, f: number) => console.log(`| ${name} | ${fmt(a)} | ${fmt(f)} | ${f > 0 ? `${fmt(a / f)}x` : '—'} |`);
  for (const part of PARTS) row(part, per(abc, part), per(floor, part));
  row('in all', total(abc), total(floor));
  console.log(`| completed per second | ${fmt(rate(abc), 1)} | ${fmt(rate(floor), 1)} | ${fmt(rate(abc) / rate(floor))}x |`);
  const against = 'the path floor, in the same rounds';
  record({ bench: 'contract-cpu', name: "CPU per contract at c=16, ABC's process and PostgreSQL", value: total(abc), unit: 'ms', ratio: total(abc) / total(floor), against });
  record({ bench: 'contract-cpu', name: "CPU per contract at c=16, ABC's process", value: inProcess(abc), unit: 'ms', ratio: inProcess(abc) / inProcess(floor), against });
  record({ bench: 'contract-cpu', name: 'CPU per contract at c=16, PostgreSQL under ABC', value: per(abc, 'PostgreSQL'), unit: 'ms', ratio: per(abc, 'PostgreSQL') / per(floor, 'PostgreSQL'), against });
  record({ bench: 'contract-cpu', name: 'CPU per contract at c=16, the path floor and PostgreSQL', value: total(floor), unit: 'ms' });
  record({ bench: 'contract-cpu', name: 'contracts completed per second at c=16, in these rounds', value: rate(abc), unit: 'contracts/s', ratio: rate(abc) / rate(floor), against });
}
