// bench/engine: what self-healing costs. The same analyze_portfolio assembly
// with one extra webhook step runs in three modes of that tool, interleaved:
// clean (it answers), retry (its first call per execution fails, retryable)
// and replan (its first call fails asking for a replan). Reported as p50 and
// p90 submit-to-done (sync) and as ratios against clean from the same run.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { readFileSync } from 'node:fs';
import { benchDatabase, contractBody, fmt, importSamplePortfolios, percentile, startAbc } from './lib.js';

const RUNS = Number(process.env.BENCH_ENGINE_RUNS ?? 30);
type Mode = 'clean' | 'retry' | 'replan';


/** The probe tool: per execution (run_id), the first call fails as the mode says. */
async function probeTool(): Promise<{ url: string; mode: { current: Mode }; close(): Promise<void> }> {
  const mode = { current: 'clean' as Mode };
  const seen = new Set<string>();
  const server = http.createServer(async (req, res) => {
    let raw = '';
    for await (const c of req) raw += c;
    const { run_id } = JSON.parse(raw) as { run_id: string };
    const first = !seen.has(run_id);
    seen.add(run_id);
    const fail = first && mode.current !== 'clean';
    if (!fail) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    const error = mode.current === 'retry' ? { code: 'BUSY', message: 'busy', retryable: true } : { code: 'STALE', message: 'stale', suggested_action: 'REPLAN' };
    res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, mode, close: () => new Promise((r) => server.close(() => r())) };
}

export async function engine(): Promise<void> {
  const db = await benchDatabase('bench_engine');
  const abc = await startAbc(db.url, { ABC_CONTRACT_WORKERS: '4' });
  const probe = await probeTool();
  try {
    await importSamplePortfolios(db.url);
    const headers = { authorization: `Bearer ${abc.key}`, 'content-type': 'application/json' };
    const post = async (path: string, json: unknown) => {
      const res = await fetch(`${abc.http}${path}`, { method: 'POST', headers, body: typeof json === 'string' ? json : JSON.stringify(json) });
      if (res.status >= 300) throw new Error(`${path} answered ${res.status}: ${await res.text()}`);
      return res.json() as Promise<Record<string, any>>;
    };
    await post('/v1/tools/register', { name: 'probe', kind: 'http', endpoint: probe.url, timeout_ms: 5000 });
    const assembly = JSON.parse(readFileSync('packs/analyze-portfolio/assemblies/analyze_portfolio/1.0.0.json', 'utf8'));
    assembly.version = '1.1.0';
    assembly.capabilities.push({ name: 'tool.probe', kind: 'TOOL' });
    assembly.steps.push({ id: 'probe', label: 'Probe', tool_name: 'tool.probe', input: {}, dependencies: ['value_positions'] });
    assembly.steps.find((s: { id: string }) => s.id === 'highlights').dependencies.push('probe');
    await post('/v1/assemblies', assembly);

    const once = async () => {
      const t = performance.now();
      const out = await post('/v1/contracts:submit', contractBody('sync', 'bench-engine'));
      if (out.kind !== 'result') throw new Error(`the execution did not succeed: ${JSON.stringify(out).slice(0, 300)}`);
      return performance.now() - t;
    };
    for (let i = 0; i < 10; i++) await once();
    const times: Record<Mode, number[]> = { clean: [], retry: [], replan: [] };
    for (let i = 0; i < RUNS; i++) {
      for (const mode of ['clean', 'retry', 'replan'] as const) {
        probe.mode.current = mode;
        times[mode].push(await once());
      }
    }
    for (const list of Object.values(times)) list.sort((a, b) => a - b);
    const p50 = (m: Mode) => percentile(times[m], 50);
    console.log('\n## engine (self-healing on analyze_portfolio plus one webhook step, sync submit-to-done)');
    for (const m of ['clean', 'retry', 'replan'] as const) {
      console.log(`${m.padEnd(6)}: p50 ${fmt(p50(m), 1)} ms  p90 ${fmt(percentile(times[m], 90), 1)} ms  ratio to clean ${fmt(p50(m) / p50('clean'))}x`);
    }
  } finally {
    await probe.close();
    await abc.stop();
    await db.close();
  }
}
