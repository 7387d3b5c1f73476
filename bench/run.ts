// npm run bench: every benchmark, each reporting ratios against a baseline from the same run.
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
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
import { figures } from './lib.js';

const benches: Record<string, () => Promise<void>> = { fanout, 'llm-proxy': llmProxy, contracts, durable, engine, observer, pep, workflow, 'python-sdk': pythonSdk, transitions };
const only = process.argv.slice(2);
const unknown = only.filter((name) => !(name in benches));
if (unknown.length) {
  console.error(`unknown bench ${unknown.join(', ')}; known: ${Object.keys(benches).join(', ')}`);
  process.exit(2);
}
const started = new Date();
// A bench that fails is reported and the others still run; the run then exits non-zero.
const failed: string[] = [];
for (const [name, bench] of Object.entries(benches)) {
  if (only.length && !only.includes(name)) continue;
  try {
    await bench();
  } catch (error) {
    failed.push(name);
    console.error(`bench ${name} failed:`, error);
  }
}
// Every figure with its ratio, machine-readable, so that runs can be compared.
const file = process.env.BENCH_RESULTS ?? 'bench/results.json';
const machine = { cpus: os.cpus().length, model: os.cpus()[0]?.model, memory_gb: Math.round(os.totalmem() / 2 ** 30), node: process.version };
await writeFile(file, `${JSON.stringify({ started: started.toISOString(), finished: new Date().toISOString(), benches: only.length ? only : Object.keys(benches), failed, machine, figures }, null, 2)}\n`);
console.log(`\n${figures.length} figures written to ${file}`);
if (failed.length) process.exitCode = 1;
