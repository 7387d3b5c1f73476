// The analyze_portfolio pack (seed 000's worked example): its contract and
// assembly, the units its plan steps call, how its result and report are built,
// its portfolio tables, and `abc portfolios import`.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { AssemblyPack } from '../../src/ports/pack.js';
import { OUTPUT } from './output.js';
import { importPortfolios, MIGRATIONS, type PortfolioDoc } from './store.js';
import { UNITS } from './units.js';

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

const pack: AssemblyPack = {
  name: 'analyze-portfolio',
  contractsDir: here('./contracts'),
  assembliesDir: here('./assemblies'),
  units: UNITS,
  outputs: { analyze_portfolio: OUTPUT },
  migrations: MIGRATIONS,
  commands: {
    portfolios: {
      usage: 'portfolios import FILE    load portfolios ({"portfolios": [...]}) for input.portfolio_ref',
      async run(args, db) {
        const [sub, file] = args;
        if (sub !== 'import' || !file) throw new Error('usage: portfolios import FILE');
        const doc = JSON.parse(await readFile(file, 'utf8')) as { portfolios?: PortfolioDoc[] };
        if (!Array.isArray(doc.portfolios)) throw new Error(`${file} has no "portfolios" array`);
        const count = await importPortfolios(db, doc.portfolios);
        return `imported ${count} portfolio(s): ${doc.portfolios.map((p) => p.portfolio_id).join(', ')}`;
      },
    },
  },
};

export default pack;
