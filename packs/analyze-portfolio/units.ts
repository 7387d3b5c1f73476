// analyze_portfolio's execution units: each does one step and returns its
// output; none decides the flow. The engine's PEP decides whether one may run.
import { fileURLToPath } from 'node:url';
import { AbcError } from '../../src/domain/errors.js';
import type { ExecutionUnit, UnitContext, UnitMeta } from '../../src/ports/pack.js';
import { allocation, attribution, performance, risk, topPositions, type RiskReport } from './analytics.js';
import { recommend, type Recommendation } from './advice.js';
import { loadMarketData, type MarketData } from './market.js';
import { DETAIL, highlights, type DetailLevel } from './report.js';
import { loadPortfolio } from './store.js';
import { valuePositions, type PositionInput, type Valuation } from './valuation.js';

const object = (required: string[]): Record<string, unknown> => ({ type: 'object', required, properties: Object.fromEntries(required.map((r) => [r, {}])) });
const meta = (permission_level: UnitMeta['permission_level'], timeout_ms: number, output: string[]): UnitMeta => ({ version: '1.0.0', permission_level, side_effect: false, timeout_ms, output_schema: object(output) });

let market: MarketData | undefined;
/** The sample market data set shipped with the pack, read once. */
const marketData = () => (market ??= loadMarketData(fileURLToPath(new URL('./data/market', import.meta.url))));

const dataSource = (code: string, message: string) => new AbcError('NOT_FOUND', { code, category: 'DATA_SOURCE', message, retryable: false });

const valuation = (ctx: UnitContext) => ctx.deps.value_positions as Valuation;

const RUN: Record<string, (ctx: UnitContext) => Promise<unknown>> = {
  'portfolio.read': async ({ input, db }) => {
    const source = input.input as { portfolio_ref?: { portfolio_id: string; account_id?: string }; positions?: PositionInput[] } | undefined;
    if (source?.positions) return { source: 'inline', positions: source.positions };
    const ref = source?.portfolio_ref;
    if (!ref) throw dataSource('PORTFOLIO_MISSING', 'the request names neither input.portfolio_ref nor input.positions');
    const found = await loadPortfolio(db, ref.portfolio_id, ref.account_id);
    if (!found) throw dataSource('PORTFOLIO_NOT_FOUND', `portfolio ${ref.portfolio_id}${ref.account_id ? ` of account ${ref.account_id}` : ''} does not exist`);
    return { source: 'portfolio_ref', portfolio_id: found.portfolio_id, positions: found.positions };
  },
  'market.read': async (ctx) => {
    const { positions } = ctx.deps.load_portfolio as { positions: PositionInput[] };
    return valuePositions(marketData(), positions, String(ctx.input.as_of), String(ctx.input.currency));
  },
  'analytics.allocation': async (ctx) => {
    const detail = DETAIL[(ctx.input.detail_level as DetailLevel) ?? 'standard'];
    const v = valuation(ctx);
    return { allocation: allocation(v, detail.dimensions), top_positions: topPositions(v, detail.topPositions), sectors: allocation(v, ['sector'])[0]!.buckets };
  },
  'analytics.risk': async (ctx) => risk(marketData(), valuation(ctx), ctx.input.benchmark_id as string | undefined),
  'analytics.performance': async (ctx) => ({ periods: performance(marketData(), valuation(ctx)), attribution: attribution(marketData(), valuation(ctx)) }),
  'advice.rules': async (ctx) => {
    const profile = ctx.input.risk_profile as { risk_level: 'conservative' | 'balanced' | 'growth' | 'aggressive'; max_drawdown_pct?: number };
    const constraints = (ctx.input.constraints ?? {}) as { restricted_assets?: string[]; tax_consideration?: boolean };
    const alloc = ctx.deps.allocation as { sectors: { name: string; weight_pct: number }[] };
    return {
      recommendations: recommend({
        valuation: valuation(ctx),
        sectors: alloc.sectors,
        risk: (ctx.deps.risk as RiskReport | undefined) ?? null,
        riskProfile: profile,
        restrictedAssets: constraints.restricted_assets ?? [],
        taxConsideration: constraints.tax_consideration ?? false,
      }),
    };
  },
  'report.highlights': async (ctx) => ({ highlights: deterministicHighlights(ctx), source: 'rules' }),
  'llm.summarize': async (ctx) => {
    if (!ctx.llm) throw new AbcError('FAILED_PRECONDITION', { code: 'LLM_NOT_CONFIGURED', category: 'COMPLIANCE', message: 'no LLM router is configured', retryable: false });
    const client = ctx.llm.client(ctx.onLlmCall);
    const facts = deterministicHighlights(ctx);
    const n = DETAIL[(ctx.input.detail_level as DetailLevel) ?? 'standard'].highlights;
    const completion = await client.chat.completions.create(
      {
        model: ctx.llm.model,
        temperature: 0,
        ...(typeof ctx.constraints?.max_tokens === 'number' && { max_tokens: ctx.constraints.max_tokens }),
        messages: [
          { role: 'system', content: `You write portfolio highlights. Reply with a JSON array of at most ${n} short strings in locale ${String(ctx.input.locale ?? 'zh-TW')}. Use only the facts given; never add numbers.` },
          { role: 'user', content: JSON.stringify(facts) },
        ],
      },
      { signal: ctx.signal },
    );
    const text = completion.choices[0]?.message?.content ?? '';
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new AbcError('INTERNAL', { code: 'LLM_BAD_OUTPUT', category: 'EXECUTION', message: 'the LLM did not answer with a JSON array', retryable: true });
    }
    if (!Array.isArray(parsed) || parsed.length === 0 || !parsed.every((x) => typeof x === 'string')) {
      throw new AbcError('INTERNAL', { code: 'LLM_BAD_OUTPUT', category: 'EXECUTION', message: 'the LLM answer is not a non-empty array of strings', retryable: true });
    }
    return { highlights: (parsed as string[]).slice(0, n), source: 'llm', model: completion.model };
  },
};

function deterministicHighlights(ctx: UnitContext): string[] {
  const n = DETAIL[(ctx.input.detail_level as DetailLevel) ?? 'standard'].highlights;
  const perf = ctx.deps.performance as { periods: { range: '1y'; return_pct: number }[] } | undefined;
  const recs = (ctx.deps.recommendations as { recommendations: Recommendation[] } | undefined)?.recommendations ?? [];
  return highlights(valuation(ctx), (ctx.deps.risk as RiskReport | undefined) ?? null, perf?.periods ?? [], recs, n);
}


const META: Record<string, UnitMeta> = {
  'portfolio.read': meta('INTERNAL', 5000, ['source', 'positions']),
  'market.read': meta('INTERNAL', 5000, ['as_of', 'currency', 'total', 'positions', 'unvalued', 'notes']),
  'analytics.allocation': meta('PUBLIC', 5000, ['allocation', 'top_positions', 'sectors']),
  'analytics.risk': meta('PUBLIC', 10_000, ['metrics', 'notes']),
  'analytics.performance': meta('PUBLIC', 10_000, ['periods', 'attribution']),
  'advice.rules': meta('PUBLIC', 5000, ['recommendations']),
  'report.highlights': meta('PUBLIC', 5000, ['highlights', 'source']),
  'llm.summarize': meta('PUBLIC', 20_000, ['highlights', 'source']),
};

export const UNITS: Record<string, ExecutionUnit> = Object.fromEntries(Object.entries(RUN).map(([name, run]) => [name, { meta: META[name]!, run }]));
