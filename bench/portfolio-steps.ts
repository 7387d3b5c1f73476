// analyze_portfolio's work as eight plain steps, for the durable-execution peers:
// the pack's own seven units (the same code ABC's engine runs, the portfolio read
// from the same PostgreSQL), then its aggregate and render.
import type pg from 'pg';
import { OUTPUT } from '../packs/analyze-portfolio/output.js';
import { UNITS } from '../packs/analyze-portfolio/units.js';
import type { PackDb } from '../src/ports/pack.js';

/** The request ABC's bench submits (bench/lib.ts contractBody), as the steps read it. */
export const REQUEST = {
  intent: 'analyze_portfolio',
  context: { as_of: '2026-11-20', currency: 'USD', risk_profile: { risk_level: 'balanced' } },
  input: { portfolio_ref: { portfolio_id: 'pf-demo-balanced' } },
  output_spec: { format: 'json', detail_level: 'standard' },
};

/** Each step: its id, the unit it runs, and the unit's input bound from the request as the assembly binds it. */
const PLAN: [id: string, unit: string, input: Record<string, unknown>][] = [
  ['load_portfolio', 'portfolio.read', { input: REQUEST.input }],
  ['value_positions', 'market.read', { as_of: REQUEST.context.as_of, currency: REQUEST.context.currency }],
  ['allocation', 'analytics.allocation', { detail_level: 'standard' }],
  ['risk', 'analytics.risk', {}],
  ['performance', 'analytics.performance', {}],
  ['recommendations', 'advice.rules', { risk_profile: REQUEST.context.risk_profile }],
  ['highlights', 'report.highlights', { detail_level: 'standard' }],
];

export type Outputs = Record<string, unknown>;

/** A PackDb over a pg pool, as ABC hands one to units. */
export function packDbOver(pool: pg.Pool): PackDb {
  const db: PackDb = {
    query: async <T extends object>(sql: string, params: unknown[] = []) => {
      let n = 0;
      return (await pool.query(sql.replace(/\?/g, () => `$${++n}`), params)).rows as T[];
    },
    transaction: (work) => work(db),
  };
  return db;
}

/** The eight steps; each takes the outputs so far and returns its own. */
export function steps(db: PackDb): { id: string; run(outputs: Outputs): Promise<unknown> }[] {
  const signal = new AbortController().signal;
  return [
    ...PLAN.map(([id, unit, input]) => ({ id, run: (deps: Outputs) => UNITS[unit]!.run({ input, deps, db, signal }) })),
    {
      id: 'report',
      run: async (outputs: Outputs) => {
        const packaged = OUTPUT.aggregate(REQUEST, outputs);
        return { result: packaged.result, artifact: OUTPUT.render(REQUEST, packaged.result, outputs) };
      },
    },
  ];
}
