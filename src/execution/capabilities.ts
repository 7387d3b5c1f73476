// The execution units behind contract plan steps. Each does one step and
// returns its output; none decides the flow. The PEP (engine/pep.ts) decides
// whether a unit may run at all.
import OpenAI from 'openai';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError } from '../domain/errors.js';
import type { PermissionLevel } from '../domain/policy.js';
import { routerBase } from './llm-upstream.js';
import { allocation, attribution, performance, risk, topPositions, type RiskReport } from '../portfolio/analytics.js';
import { recommend, type Recommendation } from '../portfolio/advice.js';
import type { MarketData } from '../portfolio/market.js';
import { DETAIL, highlights, type DetailLevel } from '../portfolio/report.js';
import { loadPortfolio } from '../portfolio/store.js';
import { valuePositions, type PositionInput, type Valuation } from '../portfolio/valuation.js';

/** What the policy and the reviewer know of a built-in unit, as of any tool (seed 002 BaseTool). */
export interface UnitMeta {
  version: string;
  permission_level: PermissionLevel;
  side_effect: boolean;
  timeout_ms: number;
  output_schema: Record<string, unknown>;
}

const object = (required: string[]): Record<string, unknown> => ({ type: 'object', required, properties: Object.fromEntries(required.map((r) => [r, {}])) });

export const UNIT_META: Record<string, UnitMeta> = {
  'portfolio.read': { version: '1.0.0', permission_level: 'INTERNAL', side_effect: false, timeout_ms: 5000, output_schema: object(['source', 'positions']) },
  'market.read': { version: '1.0.0', permission_level: 'INTERNAL', side_effect: false, timeout_ms: 5000, output_schema: object(['as_of', 'currency', 'total', 'positions', 'unvalued', 'notes']) },
  'analytics.allocation': { version: '1.0.0', permission_level: 'PUBLIC', side_effect: false, timeout_ms: 5000, output_schema: object(['allocation', 'top_positions', 'sectors']) },
  'analytics.risk': { version: '1.0.0', permission_level: 'PUBLIC', side_effect: false, timeout_ms: 10_000, output_schema: object(['metrics', 'notes']) },
  'analytics.performance': { version: '1.0.0', permission_level: 'PUBLIC', side_effect: false, timeout_ms: 10_000, output_schema: object(['periods', 'attribution']) },
  'advice.rules': { version: '1.0.0', permission_level: 'PUBLIC', side_effect: false, timeout_ms: 5000, output_schema: object(['recommendations']) },
  'report.highlights': { version: '1.0.0', permission_level: 'PUBLIC', side_effect: false, timeout_ms: 5000, output_schema: object(['highlights', 'source']) },
  'llm.summarize': { version: '1.0.0', permission_level: 'PUBLIC', side_effect: false, timeout_ms: 20_000, output_schema: object(['highlights', 'source']) },
};

export interface UnitContext {
  input: Record<string, unknown>;
  /** Outputs of the step's dependencies by step id (absent when skipped). */
  deps: Record<string, unknown>;
  em: () => EntityManager;
  market: MarketData;
  llm?: LlmAccess;
  /** Receives the record of each LLM call the unit makes. */
  onLlmCall?: (record: Record<string, unknown>) => void;
  signal: AbortSignal;
  /** The plan's constraints on the capability (assembly `capabilities[].constraints`), e.g. an LLM's max_tokens. */
  constraints?: Record<string, unknown>;
}

/** The LLM through ABC's own proxy path: `viaProxy` gives the `openai` SDK a fetch into the core's proxy. */
export interface LlmAccess {
  baseUrl: string;
  apiKey?: string;
  model: string;
  viaProxy?: (onCall?: (record: Record<string, unknown>) => void) => typeof fetch;
}

export type ExecutionUnit = (ctx: UnitContext) => Promise<unknown>;

const dataSource = (code: string, message: string) => new AbcError('NOT_FOUND', { code, category: 'DATA_SOURCE', message, retryable: false });

const valuation = (ctx: UnitContext) => ctx.deps.value_positions as Valuation;

export const EXECUTION_UNITS: Record<string, ExecutionUnit> = {
  'portfolio.read': async ({ input, em }) => {
    const source = input.input as { portfolio_ref?: { portfolio_id: string; account_id?: string }; positions?: PositionInput[] } | undefined;
    if (source?.positions) return { source: 'inline', positions: source.positions };
    const ref = source?.portfolio_ref;
    if (!ref) throw dataSource('PORTFOLIO_MISSING', 'the request names neither input.portfolio_ref nor input.positions');
    const found = await loadPortfolio(em(), ref.portfolio_id, ref.account_id);
    if (!found) throw dataSource('PORTFOLIO_NOT_FOUND', `portfolio ${ref.portfolio_id}${ref.account_id ? ` of account ${ref.account_id}` : ''} does not exist`);
    return { source: 'portfolio_ref', portfolio_id: found.portfolio_id, positions: found.positions };
  },
  'market.read': async (ctx) => {
    const { positions } = ctx.deps.load_portfolio as { positions: PositionInput[] };
    return valuePositions(ctx.market, positions, String(ctx.input.as_of), String(ctx.input.currency));
  },
  'analytics.allocation': async (ctx) => {
    const detail = DETAIL[(ctx.input.detail_level as DetailLevel) ?? 'standard'];
    const v = valuation(ctx);
    return { allocation: allocation(v, detail.dimensions), top_positions: topPositions(v, detail.topPositions), sectors: allocation(v, ['sector'])[0]!.buckets };
  },
  'analytics.risk': async (ctx) => risk(ctx.market, valuation(ctx), ctx.input.benchmark_id as string | undefined),
  'analytics.performance': async (ctx) => ({ periods: performance(ctx.market, valuation(ctx)), attribution: attribution(ctx.market, valuation(ctx)) }),
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
    const client = new OpenAI({ baseURL: routerBase(ctx.llm.baseUrl), apiKey: ctx.llm.apiKey ?? 'unused', maxRetries: 1, timeout: 15_000, ...(ctx.llm.viaProxy && { fetch: ctx.llm.viaProxy(ctx.onLlmCall) }) });
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

/** Capabilities backed by an execution unit in this process. */
export const BUILTIN_CAPABILITIES = Object.keys(EXECUTION_UNITS);
