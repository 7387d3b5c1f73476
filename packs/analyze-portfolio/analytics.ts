// Allocation, risk and performance from the valuation and the price history.
// Metrics are computed only over positions with a full price history in the
// window; what is left out is said in the notes, never filled in.
import { convert, convertByRates, dayIndex, rateOn, usdRates, type MarketData } from './market.js';
import { round, type Valuation, type ValuedPosition } from './valuation.js';

export const DIMENSIONS = ['asset_class', 'sector', 'region', 'currency'] as const;
export type Dimension = (typeof DIMENSIONS)[number];
export const RISK_LEVELS = ['conservative', 'balanced', 'growth', 'aggressive'] as const;
export type RiskLevel = (typeof RISK_LEVELS)[number];

/** Trading days per year, and the risk window. */
const YEAR = 252;
/** Fewer daily returns than this and no risk metric is computed. */
const MIN_RETURNS = 60;
/** Below this share of the value covered by price history, metrics would mislead. */
const MIN_COVERAGE_PCT = 50;

export interface Bucket { name: string; weight_pct: number }

export function allocation(valuation: Valuation, dimensions: readonly Dimension[] = DIMENSIONS): { dimension: Dimension; buckets: Bucket[] }[] {
  return dimensions.map((dimension) => {
    const sums = new Map<string, number>();
    for (const p of valuation.positions) if (p.value !== null) sums.set(p[dimension], (sums.get(p[dimension]) ?? 0) + p.value);
    const buckets = [...sums]
      .map(([name, v]) => ({ name, weight_pct: valuation.total ? round((v / valuation.total) * 100, 2) : 0 }))
      .sort((a, b) => b.weight_pct - a.weight_pct || a.name.localeCompare(b.name));
    return { dimension, buckets };
  });
}

export function topPositions(valuation: Valuation, n: number): { asset_id: string; name: string; weight_pct: number }[] {
  return valuation.positions
    .filter((p) => p.value !== null)
    .sort((a, b) => b.weight_pct - a.weight_pct || a.asset_id.localeCompare(b.asset_id))
    .slice(0, n)
    .map((p) => ({ asset_id: p.asset_id, name: p.name, weight_pct: p.weight_pct }));
}

/** Daily portfolio values (report currency) over the covered positions, oldest first. */
interface History {
  values: number[];
  covered: ValuedPosition[];
  excluded: ValuedPosition[];
  coveragePct: number;
  start: number;
  end: number;
}

function history(market: MarketData, valuation: Valuation, days: number): History | null {
  const end = dayIndex(market, valuation.as_of);
  if (end < 1) return null;
  const start = Math.max(0, end - days);
  const covered: ValuedPosition[] = [];
  const excluded: ValuedPosition[] = [];
  for (const p of valuation.positions) {
    if (p.value === null) continue;
    const priced = p.source === 'cash' || (p.source === 'market' && market.series.get(p.asset_id)!.slice(start, end + 1).every((c) => c !== null));
    (priced ? covered : excluded).push(p);
  }
  const holdings = covered.map((p) => holding(market, p, valuation.currency));
  const values: number[] = [];
  for (let i = start; i <= end; i++) {
    if (missingOn(holdings, i)) return null;
    values.push(valueOn(holdings, i));
  }
  const coveredValue = covered.reduce((s, p) => s + p.value!, 0);
  return { values, covered, excluded, coveragePct: valuation.total ? (coveredValue / valuation.total) * 100 : 0, start, end };
}

/** What a position's value on any day is made of, looked up once: `convert` of its amount, in loops over days. */
interface Holding {
  quantity: number;
  /** Cash, or valued from closes; false for a position valued some other way, which no day's value covers. */
  priced: boolean;
  /** Its closes; null for cash, whose amount is its quantity. */
  closes: (number | null)[] | null;
  /** In the report currency already: no conversion. */
  same: boolean;
  /** usdRates of its currency and of the report currency. */
  from: (number | null)[] | null;
  to: (number | null)[] | null;
}

function holding(market: MarketData, p: ValuedPosition, currency: string): Holding {
  const priced = p.source === 'cash' || p.source === 'market';
  const closes = p.source === 'market' ? market.series.get(p.asset_id)! : null;
  return { quantity: p.quantity, priced, closes, same: p.currency === currency, from: usdRates(market, p.currency), to: usdRates(market, currency) };
}

// missingOn and valueOn run for every day of every window. Their loops are indexed: on Node 24, for...of loops here allocated per figure.

/** Whether a holding's close or one of its rates is missing on day `i`, or it is not valued from closes at all. */
function missingOn(holdings: Holding[], i: number): boolean {
  for (let k = 0; k < holdings.length; k++) {
    const h = holdings[k]!;
    if (!h.priced || (h.closes !== null && h.closes[i] === null)) return true;
    if (!h.same && (rateOn(h.from, i) === null || rateOn(h.to, i) === null)) return true;
  }
  return false;
}

/** The holdings' value on day `i` in the report currency, each converted and added in their order; where none is missingOn. */
function valueOn(holdings: Holding[], i: number): number {
  let v = 0;
  for (let k = 0; k < holdings.length; k++) {
    const h = holdings[k]!;
    const amount = h.closes === null ? h.quantity : h.quantity * h.closes[i]!;
    v += h.same ? amount : convertByRates(amount, h.from, h.to, i)!;
  }
  return v;
}

const returns = (values: number[]) => values.slice(1).map((v, i) => v / values[i]! - 1);
const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
const variance = (xs: number[]) => {
  const m = mean(xs);
  return xs.reduce((s, x) => s + (x - m) ** 2, 0) / (xs.length - 1);
};

export interface RiskMetrics {
  volatility_annualized?: number;
  max_drawdown_pct?: number;
  var_95_pct?: number;
  beta?: number;
}

export interface RiskReport {
  /** The level the realised volatility puts the portfolio in, when measurable. */
  assessed_level: RiskLevel | null;
  metrics: RiskMetrics;
  notes: string[];
}

export function risk(market: MarketData, valuation: Valuation, benchmarkId: string | undefined): RiskReport {
  const notes: string[] = [];
  const h = history(market, valuation, YEAR);
  if (valuation.unvalued.length) notes.push(`Not valued: ${valuation.unvalued.map((u) => `${u.asset_id} (${u.reason})`).join('; ')}.`);
  if (!h || h.values.length - 1 < MIN_RETURNS) {
    notes.push(`Risk metrics need at least ${MIN_RETURNS} daily returns before ${valuation.as_of}; the data set has fewer, so none are reported.`);
    return { assessed_level: null, metrics: {}, notes };
  }
  if (h.excluded.length) notes.push(`No full price history for ${h.excluded.map((p) => p.asset_id).join(', ')}; metrics cover ${round(h.coveragePct, 1)}% of the portfolio value.`);
  if (h.coveragePct < MIN_COVERAGE_PCT) {
    notes.push(`Price history covers under ${MIN_COVERAGE_PCT}% of the value, so no risk metric is reported.`);
    return { assessed_level: null, metrics: {}, notes };
  }
  const r = returns(h.values);
  const vol = Math.sqrt(variance(r) * YEAR) * 100;
  let peak = h.values[0]!;
  let maxDd = 0;
  for (let i = 0; i < h.values.length; i++) {
    const v = h.values[i]!;
    peak = Math.max(peak, v);
    maxDd = Math.max(maxDd, (peak - v) / peak);
  }
  const sorted = [...r].sort((a, b) => a - b);
  const var95 = -sorted[Math.floor(0.05 * (sorted.length - 1))]! * 100;
  const metrics: RiskMetrics = { volatility_annualized: round(vol, 2), max_drawdown_pct: round(maxDd * 100, 2), var_95_pct: round(Math.max(var95, 0), 2) };
  const benchmark = benchmarkId ?? market.defaultBenchmark;
  const bench = market.series.get(benchmark);
  if (!bench || !market.benchmarks[benchmark]) {
    notes.push(`Benchmark ${benchmark} is not in the market data set, so beta is not reported.`);
  } else {
    const bv = bench.slice(h.start, h.end + 1).map((c, k) => (c === null ? null : convert(market, c, market.benchmarks[benchmark]!.currency, valuation.currency, h.start + k)));
    if (bv.some((v) => v === null)) notes.push(`Benchmark ${benchmark} lacks history in the window, so beta is not reported.`);
    else {
      const rb = returns(bv as number[]);
      const mb = mean(rb);
      const mp = mean(r);
      const cov = r.reduce((s, x, k) => s + (x - mp) * (rb[k]! - mb), 0) / (r.length - 1);
      metrics.beta = round(cov / variance(rb), 3);
    }
  }
  notes.push(`Metrics use ${r.length} daily returns up to ${market.dates[h.end]}; VaR 95 is the historical one-day loss.`);
  return { assessed_level: levelOf(vol), metrics, notes };
}

/** Realised annualised volatility (percent) to a risk level. */
export function levelOf(volPct: number): RiskLevel {
  if (volPct <= 6) return 'conservative';
  if (volPct <= 12) return 'balanced';
  if (volPct <= 20) return 'growth';
  return 'aggressive';
}

export const PERIODS = [
  ['1m', 21],
  ['3m', 63],
  ['6m', 126],
  ['1y', 252],
  ['3y', 756],
  ['5y', 1260],
] as const;

export type PeriodRange = (typeof PERIODS)[number][0] | 'ytd';

/**
 * Holding-period returns of today's positions. A period is reported only when
 * every valued position has prices across all of it.
 */
export function performance(market: MarketData, valuation: Valuation): { range: PeriodRange; return_pct: number }[] {
  const end = dayIndex(market, valuation.as_of);
  const yearStart = dayIndex(market, `${Number(valuation.as_of.slice(0, 4)) - 1}-12-31`);
  const windows = ([...PERIODS, ['ytd', end - yearStart]] as (readonly [PeriodRange, number])[]).filter(
    ([range, days]) => days > 0 && end - days >= 0 && (range !== 'ytd' || yearStart >= 0),
  );
  // The portfolio's value day by day back from `end`, as far back as the longest window or to the first day it is missing.
  const holdings = valuation.positions.filter((p) => p.value !== null).map((p) => holding(market, p, valuation.currency));
  const longest = Math.max(0, ...windows.map(([, days]) => days));
  const back: number[] = [];
  for (let k = 0; k <= longest && windows.length && !missingOn(holdings, end - k); k++) back.push(valueOn(holdings, end - k));
  return windows.filter(([, days]) => days < back.length).map(([range, days]) => ({ range, return_pct: round((back[0]! / back[days]! - 1) * 100, 2) }));
}

/** Each covered position's contribution to the one-year return, in percentage points. */
export function attribution(market: MarketData, valuation: Valuation): { asset_id: string; contribution_pct: number }[] {
  const end = dayIndex(market, valuation.as_of);
  const start = end - YEAR;
  if (start < 0) return [];
  const startValue = (p: ValuedPosition, i: number) =>
    p.source === 'cash' ? convert(market, p.quantity, p.currency, valuation.currency, i) : (() => {
      const c = market.series.get(p.asset_id)?.[i];
      return c == null ? null : convert(market, p.quantity * c, p.currency, valuation.currency, i);
    })();
  const rows = valuation.positions.map((p) => ({ p, a: startValue(p, start), b: startValue(p, end) })).filter((x) => x.a !== null && x.b !== null);
  const total = rows.reduce((s, x) => s + x.a!, 0);
  return rows
    .map((x) => ({ asset_id: x.p.asset_id, contribution_pct: round(((x.b! - x.a!) / total) * 100, 2) }))
    .sort((a, b) => b.contribution_pct - a.contribution_pct);
}
