// Contract requests for tests: a valid analyze_portfolio request and helpers.
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { ContractRegistry } from '../../src/contracts/registry.js';
import { toAssembly } from '../../src/decision/handlers.js';
import type { AssemblyDef } from '../../src/decision/planner.js';
import { importPortfolios } from '../../packs/analyze-portfolio/store.js';
import { migratePacks, packDb } from '../../src/store/pack-db.js';
import { PACKS } from './core.js';
import type { Orm } from '../../src/store/orm.js';
import { readFileSync } from 'node:fs';

export const CONTRACT = { contract_id: 'com.thaleon.wm:analyze-portfolio', version: '1.0.0' };
export const registry = ContractRegistry.load(path.resolve('packs/analyze-portfolio/contracts'));
export const contract = registry.get(CONTRACT.contract_id, CONTRACT.version)!;

type Json = Record<string, any>;

/** A valid request; `patch` is deep-merged (null deletes a key). */
export function request(patch: Json = {}): Json {
  const id = randomUUID();
  const base: Json = {
    contract: { ...CONTRACT },
    intent: 'analyze_portfolio',
    correlation: { request_id: `req-${id}`, idempotency_key: `idem-${id}`, session_id: 'session-0001', sent_at: '2026-11-22T08:00:00Z' },
    context: { as_of: '2026-11-20', currency: 'USD', locale: 'en-US', risk_profile: { risk_level: 'balanced', max_drawdown_pct: 15 } },
    input: { portfolio_ref: { portfolio_id: 'pf-demo-balanced' } },
    output_spec: { format: 'json', detail_level: 'standard' },
    execution_preferences: { mode: 'async' },
  };
  return merge(base, patch);
}

function merge(a: Json, b: Json): Json {
  const out: Json = { ...a };
  for (const [k, v] of Object.entries(b)) {
    if (v === null) delete out[k];
    else if (v && typeof v === 'object' && !Array.isArray(v) && a[k] && typeof a[k] === 'object' && !Array.isArray(a[k])) out[k] = merge(a[k], v);
    else out[k] = v;
  }
  return out;
}

export async function importSamplePortfolios(orm: Orm): Promise<void> {
  const doc = JSON.parse(readFileSync(path.resolve('packs/analyze-portfolio/data/portfolios/sample.json'), 'utf8'));
  await migratePacks(orm, PACKS);
  await importPortfolios(packDb(() => orm.em.fork()), doc.portfolios);
}

/** Polls over HTTP until the ticket finishes, using the long wait. */
export async function pollUntilDone(http: (p: string) => Promise<Response>, ticket: string): Promise<Json> {
  for (let i = 0; i < 100; i++) {
    const res = await http(`/v1/tickets/${ticket}?wait_ms=2000`);
    const body = (await res.json()) as Json;
    if (['SUCCEEDED', 'FAILED', 'CANCELED'].includes(body.status)) return body;
  }
  throw new Error(`ticket ${ticket} did not finish`);
}

/** The reference assembly file, as a starting point for new versions. */
export function referenceAssembly(): Record<string, any> {
  return JSON.parse(readFileSync(path.resolve('packs/analyze-portfolio/assemblies/analyze_portfolio/1.0.0.json'), 'utf8'));
}

/** An assembly in its proto shape (for DecisionService.RegisterAssembly). */
export const assemblyMessage = (a: Record<string, any>) => toAssembly(a as AssemblyDef, false);
