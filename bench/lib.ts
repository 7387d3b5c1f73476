// Shared bench helpers: percentiles, an ABC child process, an embedded database.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import pg from 'pg';
import { createLogger } from '../src/runtime/log.js';
import { ensureDatabase } from '../src/store/database.js';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../src/store/embedded-pg.js';

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** The median of unsorted figures. */
export const median = (xs: number[]) => percentile([...xs].sort((a, b) => a - b), 50);

export const fmt = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

/** One figure of a bench, for bench/results.json. `ratio` is against the baseline named in `against`. */
export interface Figure {
  bench: string;
  name: string;
  value: number;
  unit: string;
  ratio?: number;
  against?: string;
  goal?: string;
}

/** Every figure recorded in this run, in order. */
export const figures: Figure[] = [];

/** Records a figure for bench/results.json and returns its value. */
export function record(figure: Figure): number {
  figures.push(figure);
  return figure.value;
}

/**
 * `rounds` rounds that the sides take in turn, each side's results in its
 * order: a machine whose speed drifts over a run slows every side alike, so
 * the ratios hold. With `warm`, each side first takes an untimed round of its
 * own, so that every figure is of its steady state.
 */
export async function inTurn<T>(sides: (() => Promise<T>)[], rounds: number, warm = false): Promise<T[][]> {
  if (warm) for (const side of sides) await side();
  const results = sides.map((): T[] => []);
  for (let r = 0; r < rounds; r++) for (const [i, side] of sides.entries()) results[i]!.push(await side());
  return results;
}

/** `n` calls of `call`, `concurrency` at a time: each call's latency and the calls per second. */
export async function loadCalls(n: number, concurrency: number, call: (i: number) => Promise<unknown>): Promise<{ latencies: number[]; rps: number }> {
  const latencies: number[] = [];
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const i = next++;
        const t = performance.now();
        await call(i);
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { latencies, rps: n / ((performance.now() - start) / 1000) };
}

export interface BenchDb {
  url: string;
  cluster: EmbeddedDatabase | undefined;
  close(): Promise<void>;
}

/** DATABASE_URL's server, or a throwaway embedded cluster, with a fresh database. */
export async function benchDatabase(name: string): Promise<BenchDb> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'abc-bench-'));
  // Room for every side of a comparison at once: the durable bench keeps ABC, its peers and its floors connected.
  const cluster = process.env.DATABASE_URL ? undefined : await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), logger: createLogger('warn'), maxConnections: 200 });
  const admin = process.env.DATABASE_URL ?? cluster!.adminUrl;
  const db = `${name}_${Date.now()}`;
  await ensureDatabase(admin, db);
  const url = new URL(admin);
  url.pathname = `/${db}`;
  return {
    url: url.toString(),
    cluster,
    close: async () => {
      await cluster?.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Leaves the database at `url` as quiet as a fresh one before the next side
 * of a comparison: VACUUM (ANALYZE) takes the work autovacuum would otherwise
 * start in the middle of it, CHECKPOINT writes out the last load's pages, and
 * any autovacuum worker still running is waited for.
 */
export async function settle(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('VACUUM (ANALYZE)');
    await client.query('CHECKPOINT');
    while ((await client.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")).rows[0]!.n > 0) {
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    await client.end();
  }
}

export interface AbcProcess {
  http: string;
  /** The core's gRPC address. */
  grpc: string;
  key: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** `abc serve` as a child process against `databaseUrl`, with a known API key. */
export async function startAbc(databaseUrl: string, env: Record<string, string> = {}): Promise<AbcProcess> {
  const key = `abc_bench_${Date.now()}_key_material`;
  // BENCH_CPU_PROF=DIR writes a V8 CPU profile of every ABC thread into DIR.
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const child = spawn(process.execPath, [...profile, 'bin/abc.js', 'serve'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, ABC_API_KEYS: key, ABC_HTTP_ADDR: '127.0.0.1:0', ABC_GRPC_ADDR: '127.0.0.1:0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const { http, grpc } = JSON.parse(await firstLine(child, (line) => (line.includes('"ABC is ready"') ? line : undefined), 'abc serve')) as { http: string; grpc: string };
  return {
    http,
    grpc,
    key,
    child,
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

/** A child process that prints its URL on its first line of output. */
export async function startChild(args: string[], url: (line: string) => string | undefined, stderr: 'inherit' | 'ignore' = 'inherit'): Promise<{ url: string; pid: number; stop(): void }> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', stderr] });
  return { url: await firstLine(child, (line) => url(line.trim()), args.join(' ')), pid: child.pid!, stop: () => child.kill() };
}

/**
 * What `pick` finds in the first line of a child's output that it accepts. The
 * rest of the output is read and dropped: a reader left on it would scan every
 * later line (an ABC logs each request), and the bench would pay for that.
 */
function firstLine(child: ChildProcess, pick: (line: string) => string | undefined, name: string): Promise<string> {
  const stdout = child.stdout!;
  return new Promise<string>((resolve, reject) => {
    let buffer = '';
    const read = (chunk: Buffer) => {
      buffer += chunk.toString();
      const lines = buffer.split('\n');
      buffer = lines.pop()!;
      for (const line of lines) {
        const found = pick(line);
        if (found === undefined) continue;
        stdout.off('data', read);
        stdout.resume();
        child.off('exit', exited);
        return resolve(found);
      }
    };
    const exited = (code: number | null) => reject(new Error(`${name} exited with ${code}`));
    stdout.on('data', read);
    child.once('exit', exited);
  });
}

/**
 * bench/read-floor.ts in a process of its own, like ABC: `get('grpc', name, arg)`
 * reads through HTTP -> gRPC -> SELECT, `get('sql', name, arg)` through HTTP -> SELECT.
 */
export async function startReadFloor(databaseUrl: string, queries: Record<string, string>) {
  const child = await startChild(['--import', 'tsx', 'bench/read-floor.ts', databaseUrl, JSON.stringify(queries)], (line) => (line.startsWith('http') ? line : undefined));
  return {
    ...child,
    get: async (hops: 'grpc' | 'sql', name: string, arg: string) => {
      const res = await fetch(`${child.url}/${hops}/${name}/${encodeURIComponent(arg)}`);
      if (res.status !== 200) throw new Error(`read floor answered ${res.status}`);
      return res.json();
    },
  };
}

/** The pack's sample portfolios, imported into the database at `url` as a user would (`abc portfolios import`). */
export async function importSamplePortfolios(url: string): Promise<void> {
  await promisify(execFile)(process.execPath, ['bin/abc.js', 'portfolios', 'import', 'packs/analyze-portfolio/data/portfolios/sample.json'], { env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn' } });
}

/** The floor of a sync contract's path (bench/contract-floor.ts) over `url`, copying the records of `ticket`, in a process of its own like ABC. */
export const startPathFloor = (url: string, ticket: string) =>
  startChild(['--import', 'tsx', 'bench/contract-floor.ts', url, ticket], (line) => (line.startsWith('http') ? line : undefined));

/** One sync analyze_portfolio submit to `base` (ABC, or a floor of its path), which must answer with its result. */
export async function submitSync(base: string, headers: Record<string, string>): Promise<void> {
  const res = await fetch(`${base}/v1/contracts:submit`, { method: 'POST', headers, body: contractBody('sync', 'bench-durable') });
  const json = (await res.json()) as { kind?: string };
  if (res.status !== 200 || json.kind !== 'result') throw new Error(`sync submit answered ${res.status}: ${JSON.stringify(json).slice(0, 300)}`);
}

/** An analyze_portfolio request for the sample portfolio, with fresh correlation ids. */
export function contractBody(mode: 'sync' | 'async', sessionId: string): string {
  const id = randomUUID();
  return JSON.stringify({
    contract: { contract_id: 'com.thaleon.wm:analyze-portfolio', version: '1.0.0' },
    intent: 'analyze_portfolio',
    correlation: { request_id: `req-${id}`, idempotency_key: `idem-${id}`, session_id: sessionId, sent_at: new Date().toISOString() },
    context: { as_of: '2026-11-20', currency: 'USD', risk_profile: { risk_level: 'balanced' } },
    input: { portfolio_ref: { portfolio_id: 'pf-demo-balanced' } },
    output_spec: { format: 'json', detail_level: 'standard' },
    execution_preferences: { mode, max_latency_ms: 30000 },
  });
}
