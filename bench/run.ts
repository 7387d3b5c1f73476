// npm run bench: every benchmark, each reporting ratios against a baseline from the same run.
import { readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { contractCpu } from './contract-cpu.js';
import { contracts } from './contracts.js';
import { durable } from './durable.js';
import { engine } from './engine.js';
import { fanout } from './fanout.js';
import { llmProxy } from './llm-proxy.js';
import { observer } from './observer.js';
import { pep } from './pep.js';
import { pythonSdk } from './python-sdk.js';
import { transitions } from './transitions.js';
import { workflow } from './workflow.js';
import { figures, type Figure } from './lib.js';

const benches: Record<string, () => Promise<void>> = { fanout, 'llm-proxy': llmProxy, contracts, durable, 'contract-cpu': contractCpu, engine, observer, pep, workflow, 'python-sdk': pythonSdk, transitions };
const only = process.argv.slice(2);
const unknown = only.filter((name) => !(name in benches));
if (unknown.length) {
  console.error(`unknown bench ${unknown.join(', ')}; known: ${Object.keys(benches).join(', ')}`);
  process.exit(2);
}
// A bench that fails is reported and the others still run; the run then exits non-zero.
const failed: string[] = [];
const ran: Record<string, BenchRun> = {};
for (const [name, bench] of Object.entries(benches)) {
  if (only.length && !only.includes(name)) continue;
  const started = new Date().toISOString();
  try {
    await bench();
  } catch (error) {
    failed.push(name);
    console.error(`bench ${name} failed:`, error);
  }
  ran[name] = { started, finished: new Date().toISOString(), node: process.version, ...(failed.includes(name) && { failed: true }) };
}
// Every figure with its ratio, machine-readable, so that runs can be compared. A run of some
// benches replaces their figures and keeps the others' from the runs before it, each bench
// with the times and the Node of its own run.
const file = process.env.BENCH_RESULTS ?? 'bench/results.json';
const machine = { cpus: os.cpus().length, model: os.cpus()[0]?.model, memory_gb: Math.round(os.totalmem() / 2 ** 30) };
const before = only.length ? await previous(file) : undefined;
const kept = before ? before.figures.filter((f) => !(f.bench in ran)) : [];
const runs = { ...before?.benches, ...ran };
const names = Object.keys(benches);
const order = (bench: string) => (names.includes(bench) ? names.indexOf(bench) : names.length);
const results: Results = {
  benches: Object.fromEntries(names.filter((name) => name in runs).map((name) => [name, runs[name]!])),
  machine,
  figures: [...kept, ...figures].sort((a, b) => order(a.bench) - order(b.bench)),
};
await writeFile(file, `${JSON.stringify(results, null, 2)}\n`);
console.log(`\n${figures.length} figures written to ${file}${kept.length ? `, with ${kept.length} kept from earlier runs of other benches` : ''}`);
if (failed.length) process.exitCode = 1;

interface BenchRun {
  started: string;
  finished: string;
  node: string;
  failed?: true;
}

interface Results {
  benches: Record<string, BenchRun>;
  machine: { cpus: number; model?: string; memory_gb: number };
  figures: Figure[];
}

/** The results a run of some benches adds to; none when the file is absent, unreadable or from another machine. */
async function previous(path: string): Promise<Results | undefined> {
  let read: unknown;
  try {
    read = JSON.parse(await readFile(path, 'utf8'));
  } catch {
    return undefined;
  }
  const r = read as Partial<Results> & { started?: string; finished?: string; benches?: unknown; failed?: string[]; machine?: { node?: string } };
  if (!Array.isArray(r.figures) || !r.machine || r.machine.cpus !== machine.cpus || r.machine.model !== machine.model) return undefined;
  // The earlier format: one run of every bench it names.
  const benchesOf = Array.isArray(r.benches)
    ? Object.fromEntries((r.benches as string[]).map((name) => [name, { started: r.started!, finished: r.finished!, node: r.machine!.node ?? '', ...(r.failed?.includes(name) && { failed: true as const }) }]))
    : (r.benches as Record<string, BenchRun>);
  return { benches: benchesOf, machine, figures: r.figures };
}
