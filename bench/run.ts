// npm run bench: every benchmark, each reporting ratios against a baseline from the same run.
import { contracts } from './contracts.js';
import { engine } from './engine.js';
import { fanout } from './fanout.js';
import { llmProxy } from './llm-proxy.js';
import { observer } from './observer.js';
import { pep } from './pep.js';
import { pythonSdk } from './python-sdk.js';
import { workflow } from './workflow.js';

const benches: Record<string, () => Promise<void>> = { fanout, 'llm-proxy': llmProxy, contracts, engine, observer, pep, workflow, 'python-sdk': pythonSdk };
const only = process.argv.slice(2);
for (const [name, bench] of Object.entries(benches)) {
  if (only.length && !only.includes(name)) continue;
  await bench();
}
