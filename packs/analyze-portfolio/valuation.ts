// Values positions at `as_of` in the report currency. A price that is not in
// the data set is never invented: the position is valued from a reported
// market value, or left unvalued and named.
//
// The caller's holdings are its system of record: a reported `market_value` is
// the value used. Where ABC's own repricing differs from it by more than 1%,
// a warning names both. Every other disagreement between the request and the
// market data (currency, asset type, a date past the data) is also a warning.
import { AbcError } from '../../src/domain/errors.js';
import { convert, dayIndex, type MarketData } from './market.js';

/** How far a reported market value may differ from ABC's repricing before it is flagged. */
export const REPRICING_TOLERANCE = 0.01;

export interface PositionInput {
  asset_id: string;
  asset_type: string;
  quantity: number;
  cost_basis?: number;
  market_value?: number;
  currency?: string;
}

export type PriceSource = 'market' | 'reported' | 'cash' | 'missing';

export interface ValuedPosition {
  asset_id: string;
  name: string;
  asset_type: string;
  asset_class: string;
  sector: string;
  region: string;
  currency: string;
  quantity: number;
  cost_basis?: number;
  /** Value in the report currency; null when it cannot be computed. */
  value: number | null;
  /** Value in the position's own currency. */
  local_value: number | null;
  weight_pct: number;
  source: PriceSource;
}

export interface Valuation {
  as_of: string;
  currency: string;
  total: number;
  positions: ValuedPosition[];
  /** Positions that could not be valued, with the reason. */
  unvalued: { asset_id: string; reason: string }[];
  /** Where the request and the market data disagree, and what was used. */
  notes: string[];
}

const CLASS_OF_TYPE: Record<string, string> = { equity: 'equity', bond: 'fixed_income', cash: 'cash', crypto: 'crypto', fund: 'fund', etf: 'fund', other: 'other' };

/** Asset types that name one asset class; an ETF, a fund or "other" may hold any. */
const CLASS_OF_SPECIFIC_TYPE: Record<string, string> = { equity: 'equity', bond: 'fixed_income', crypto: 'crypto', cash: 'cash' };

const hasFx = (market: MarketData, currency: string) => currency === 'USD' || market.series.has(`FX:${currency}`);

export function valuePositions(market: MarketData, positions: PositionInput[], asOf: string, currency: string): Valuation {
  if (!hasFx(market, currency)) {
    throw new AbcError('FAILED_PRECONDITION', { code: 'UNSUPPORTED_CURRENCY', category: 'DATA_SOURCE', message: `no FX data for the report currency ${currency}`, retryable: false, details: { currency } });
  }
  const short = positions.find((p) => p.quantity < 0);
  if (short) {
    throw new AbcError('INVALID_ARGUMENT', { code: 'SHORT_POSITION_UNSUPPORTED', category: 'VALIDATION', message: `position ${short.asset_id} has a negative quantity (${short.quantity}); short positions are not supported`, retryable: false, details: { asset_id: short.asset_id, field: 'input.positions.quantity' } });
  }
  const day = dayIndex(market, asOf);
  const notes: string[] = [];
  const lastDate = market.dates.at(-1);
  if (day >= 0 && lastDate !== undefined && asOf > lastDate) notes.push(`market data ends on ${lastDate}: positions are valued at its closes, not at ${asOf}`);
  const unvalued: Valuation['unvalued'] = [];
  const valued = positions.map((p): ValuedPosition => {
    const meta = market.assets[p.asset_id];
    const cash = p.asset_type === 'cash';
    const ccy = p.currency ?? (cash ? p.asset_id.split('.')[1] : undefined) ?? meta?.currency ?? currency;
    if (meta && p.currency && p.currency !== meta.currency) notes.push(`${p.asset_id} trades in ${meta.currency}, but the request says ${p.currency}: the request's currency was used`);
    const implied = CLASS_OF_SPECIFIC_TYPE[p.asset_type];
    if (meta && implied && implied !== meta.asset_class) {
      notes.push(`${p.asset_id} is ${meta.asset_class} in the market data, but the request says ${p.asset_type}: the market data's class was used`);
    }
    const base = {
      asset_id: p.asset_id,
      name: meta?.name ?? (cash ? `Cash (${ccy})` : p.asset_id),
      asset_type: p.asset_type,
      asset_class: meta?.asset_class ?? CLASS_OF_TYPE[p.asset_type] ?? 'other',
      sector: meta?.sector ?? (cash ? 'Cash' : 'Unclassified'),
      region: meta?.region ?? 'Unclassified',
      currency: ccy,
      quantity: p.quantity,
      ...(p.cost_basis !== undefined && { cost_basis: p.cost_basis }),
      weight_pct: 0,
    };
    const close = day >= 0 ? market.series.get(p.asset_id)?.[day] : undefined;
    let local: number | null = null;
    let source: PriceSource = 'missing';
    if (cash) [local, source] = [p.quantity, 'cash'];
    else if (p.market_value !== undefined) {
      [local, source] = [p.market_value, 'reported'];
      const repriced = close != null ? p.quantity * close : null;
      if (repriced !== null && Math.abs(repriced - p.market_value) > REPRICING_TOLERANCE * Math.max(Math.abs(repriced), Math.abs(p.market_value))) {
        notes.push(`${p.asset_id}: the reported market value ${p.market_value} ${ccy} was used; at the ${market.dates[day]} close ABC prices it at ${round(repriced, 2)} ${ccy}`);
      }
    } else if (close != null) [local, source] = [p.quantity * close, 'market'];
    const value = local === null || day < 0 ? null : convert(market, local, ccy, currency, day);
    if (value === null) {
      unvalued.push({ asset_id: p.asset_id, reason: local === null ? `no price for ${p.asset_id} on or before ${asOf}` : `no ${ccy}/${currency} rate on ${asOf}` });
      return { ...base, value: null, local_value: local, source: 'missing' };
    }
    return { ...base, value, local_value: local, source };
  });
  const total = valued.reduce((s, p) => s + (p.value ?? 0), 0);
  for (const p of valued) p.weight_pct = p.value === null || total === 0 ? 0 : round((p.value / total) * 100, 2);
  return { as_of: asOf, currency, total: round(total, 2), positions: valued, unvalued, notes };
}

export const round = (x: number, digits: number) => {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
};
