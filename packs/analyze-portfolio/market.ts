// The sample market data set (data/market): daily closes, FX rates and asset
// metadata. Read-only; prices are looked up as the last close on or before a date.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface AssetMeta {
  name: string;
  asset_class: string;
  sector: string;
  region: string;
  currency: string;
}

export interface MarketData {
  dates: string[];
  assets: Record<string, AssetMeta>;
  benchmarks: Record<string, { name: string; currency: string }>;
  defaultBenchmark: string;
  /** Closes by series id (assets, benchmarks and `FX:CCC`), aligned with `dates`; null where missing. */
  series: Map<string, (number | null)[]>;
}

export function loadMarketData(dir: string): MarketData {
  const meta = JSON.parse(readFileSync(join(dir, 'assets.json'), 'utf8')) as {
    assets: Record<string, AssetMeta>;
    benchmarks: Record<string, { name: string; currency: string }>;
    default_benchmark: string;
  };
  const [header, ...lines] = readFileSync(join(dir, 'closes.csv'), 'utf8').trim().split('\n');
  const ids = header!.split(',').slice(1);
  const series = new Map(ids.map((id) => [id, [] as (number | null)[]]));
  const dates: string[] = [];
  for (const line of lines) {
    const [date, ...cells] = line.split(',');
    dates.push(date!);
    cells.forEach((c, i) => series.get(ids[i]!)!.push(c === '' ? null : Number(c)));
  }
  return { dates, assets: meta.assets, benchmarks: meta.benchmarks, defaultBenchmark: meta.default_benchmark, series };
}

/** Index of the last trading day on or before `date`, or -1. */
export function dayIndex(market: MarketData, date: string): number {
  let lo = 0;
  let hi = market.dates.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (market.dates[mid]! <= date) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

/** Price of one unit of `currency` in USD on day `i`; null when unknown. */
export function usdPer(market: MarketData, currency: string, i: number): number | null {
  return rateOn(usdRates(market, currency), i);
}

/** `usdPer` on every day, aligned with `dates`: null for USD itself, whose price is 1, and empty for a currency without rates. */
export function usdRates(market: MarketData, currency: string): (number | null)[] | null {
  return currency === 'USD' ? null : (market.series.get(`FX:${currency}`) ?? []);
}

/** A `usdRates`' price on day `i`. */
export const rateOn = (rates: (number | null)[] | null, i: number): number | null => (rates === null ? 1 : (rates[i] ?? null));

/** Converts an amount between currencies on day `i`; null when a rate is missing. */
export function convert(market: MarketData, amount: number, from: string, to: string, i: number): number | null {
  return from === to ? amount : convertByRates(amount, usdRates(market, from), usdRates(market, to), i);
}

/** `convert` between the currencies whose `usdRates` are `from` and `to`, for loops over days that look them up once. */
export function convertByRates(amount: number, from: (number | null)[] | null, to: (number | null)[] | null, i: number): number | null {
  const a = rateOn(from, i);
  const b = rateOn(to, i);
  return a === null || b === null ? null : (amount * a) / b;
}
