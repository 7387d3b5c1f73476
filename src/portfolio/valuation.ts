// Values positions at `as_of` in the report currency. A price that is not in
// the data set is never invented: the position is valued from a reported
// market value, or left unvalued and named.
import { convert, dayIndex, type MarketData } from './market.js';

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
}

const CLASS_OF_TYPE: Record<string, string> = { equity: 'equity', bond: 'fixed_income', cash: 'cash', crypto: 'crypto', fund: 'fund', etf: 'fund', other: 'other' };

export function valuePositions(market: MarketData, positions: PositionInput[], asOf: string, currency: string): Valuation {
  const day = dayIndex(market, asOf);
  const unvalued: Valuation['unvalued'] = [];
  const valued = positions.map((p): ValuedPosition => {
    const meta = market.assets[p.asset_id];
    const cash = p.asset_type === 'cash';
    const ccy = p.currency ?? (cash ? p.asset_id.split('.')[1] : undefined) ?? meta?.currency ?? currency;
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
    else if (close != null) [local, source] = [p.quantity * close, 'market'];
    else if (p.market_value !== undefined) [local, source] = [p.market_value, 'reported'];
    const value = local === null || day < 0 ? null : convert(market, local, ccy, currency, day);
    if (value === null) {
      unvalued.push({ asset_id: p.asset_id, reason: local === null ? `no price for ${p.asset_id} on or before ${asOf}` : `no ${ccy}/${currency} rate on ${asOf}` });
      return { ...base, value: null, local_value: local, source: 'missing' };
    }
    return { ...base, value, local_value: local, source };
  });
  const total = valued.reduce((s, p) => s + (p.value ?? 0), 0);
  for (const p of valued) p.weight_pct = p.value === null || total === 0 ? 0 : round((p.value / total) * 100, 2);
  return { as_of: asOf, currency, total: round(total, 2), positions: valued, unvalued };
}

export const round = (x: number, digits: number) => {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
};
