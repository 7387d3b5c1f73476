// Portfolio analytics on a small, hand-checkable market.
import { describe, expect, it } from 'vitest';
import { allocation, levelOf, performance, risk, topPositions } from './analytics.js';
import { recommend } from './advice.js';
import type { MarketData } from './market.js';
import { disclaimer, renderMarkdown } from './report.js';
import { round, valuePositions } from './valuation.js';

/** 100 trading days: A alternates +1%/−1%, B is flat, the benchmark is A. */
function market(): MarketData {
  const dates = Array.from({ length: 100 }, (_, i) => new Date(Date.UTC(2026, 0, 1 + i)).toISOString().slice(0, 10));
  let a = 100;
  const aSeries = dates.map((_, i) => (i === 0 ? a : (a *= i % 2 ? 1.01 : 0.99)));
  return {
    dates,
    assets: {
      A: { name: 'Alpha', asset_class: 'equity', sector: 'Tech', region: 'Europe', currency: 'EUR' },
      B: { name: 'Beta Bond', asset_class: 'fixed_income', sector: 'Bonds', region: 'Europe', currency: 'EUR' },
    },
    benchmarks: { IDX: { name: 'Index', currency: 'EUR' } },
    defaultBenchmark: 'IDX',
    series: new Map<string, (number | null)[]>([
      ['A', aSeries],
      ['B', dates.map(() => 50)],
      ['IDX', aSeries],
      ['FX:EUR', dates.map(() => 1.1)],
    ]),
  };
}

describe('valuation', () => {
  it('prices at the last close on or before as_of, converts currency, and never invents a price', () => {
    const m = market();
    const v = valuePositions(m, [
      { asset_id: 'B', asset_type: 'bond', quantity: 10 },
      { asset_id: 'CASH.USD', asset_type: 'cash', quantity: 110 },
      { asset_id: 'ZZZ', asset_type: 'other', quantity: 1 },
    ], '2026-12-31', 'EUR');
    expect(v.total).toBe(600); // 10 × 50 EUR + 110 USD / 1.1
    expect(v.positions.map((p) => [p.asset_id, p.weight_pct])).toEqual([['B', 83.33], ['CASH.USD', 16.67], ['ZZZ', 0]]);
    expect(v.unvalued).toEqual([{ asset_id: 'ZZZ', reason: 'no price for ZZZ on or before 2026-12-31' }]);
  });
});

describe('risk', () => {
  it('computes volatility, drawdown, VaR and a beta of 1 against itself', () => {
    const m = market();
    const v = valuePositions(m, [{ asset_id: 'A', asset_type: 'equity', quantity: 1 }], m.dates.at(-1)!, 'EUR');
    const r = risk(m, v, undefined);
    // Daily returns alternate ±1%: sample stdev ≈ 1.005%, annualised ×√252.
    expect(r.metrics.volatility_annualized).toBeCloseTo(0.01005 * Math.sqrt(252) * 100, 0);
    expect(r.metrics.var_95_pct).toBe(1);
    expect(r.metrics.beta).toBe(1);
    expect(r.metrics.max_drawdown_pct).toBeGreaterThan(1);
    expect(r.assessed_level).toBe('growth');
  });

  it('reports no metric without enough history, and says why', () => {
    const m = market();
    const v = valuePositions(m, [{ asset_id: 'A', asset_type: 'equity', quantity: 1 }], m.dates[20]!, 'EUR');
    const r = risk(m, v, undefined);
    expect(r.metrics).toEqual({});
    expect(r.notes.join(' ')).toContain('at least 60 daily returns');
  });

  it('omits beta for an unknown benchmark', () => {
    const m = market();
    const v = valuePositions(m, [{ asset_id: 'A', asset_type: 'equity', quantity: 1 }], m.dates.at(-1)!, 'EUR');
    const r = risk(m, v, 'NOPE');
    expect(r.metrics.beta).toBeUndefined();
    expect(r.notes.join(' ')).toContain('Benchmark NOPE is not in the market data set');
  });

  it('maps volatility to risk levels', () => {
    expect([3, 10, 15, 30].map(levelOf)).toEqual(['conservative', 'balanced', 'growth', 'aggressive']);
  });
});

describe('allocation, performance and advice', () => {
  const m = market();
  const v = valuePositions(m, [
    { asset_id: 'A', asset_type: 'equity', quantity: 8, cost_basis: 1000 },
    { asset_id: 'B', asset_type: 'bond', quantity: 2 },
  ], m.dates.at(-1)!, 'EUR');

  it('buckets by dimension and ranks the top positions', () => {
    const [assetClass] = allocation(v, ['asset_class']);
    expect(assetClass!.buckets.map((b) => b.name)).toEqual(['equity', 'fixed_income']);
    expect(assetClass!.buckets.reduce((s, b) => s + b.weight_pct, 0)).toBeCloseTo(100, 1);
    expect(topPositions(v, 1).map((p) => p.asset_id)).toEqual(['A']);
  });

  it('reports only periods the history covers', () => {
    expect(performance(m, v).map((p) => p.range)).toEqual(['1m', '3m']);
  });

  it('reports no period across a missing close or rate, and each return from the ends of its window', () => {
    const gap = market();
    const a = gap.series.get('A')!;
    a[50] = null; // inside 3m (days 36 to 99), not 1m (78 to 99)
    const worth = (i: number) => 8 * a[i]! + 2 * 50;
    const priced = valuePositions(gap, [{ asset_id: 'A', asset_type: 'equity', quantity: 8 }, { asset_id: 'B', asset_type: 'bond', quantity: 2 }], gap.dates.at(-1)!, 'EUR');
    expect(performance(gap, priced)).toEqual([{ range: '1m', return_pct: round((worth(99) / worth(78) - 1) * 100, 2) }]);
    gap.series.get('FX:EUR')![90] = null; // reported in USD, day 90 has no rate
    expect(performance(gap, valuePositions(gap, [{ asset_id: 'B', asset_type: 'bond', quantity: 2 }], gap.dates.at(-1)!, 'USD'))).toEqual([]);
  });

  it('explains each recommendation with the numbers behind it', () => {
    const r = risk(m, v, undefined);
    const recs = recommend({ valuation: v, sectors: allocation(v, ['sector'])[0]!.buckets, risk: r, riskProfile: { risk_level: 'conservative', max_drawdown_pct: 0.5 }, restrictedAssets: ['B'], taxConsideration: true });
    expect(recs.map((x) => x.title)).toEqual([
      'Exit restricted holdings',
      'Reduce concentration in A',
      'Diversify away from Tech',
      'Bring risk back to the conservative profile',
      'Limit drawdown',
      'Harvest tax losses',
      'Stagger sales for tax efficiency',
    ]);
    expect(recs[1]!.rationale[0]).toMatch(/^A is \d+(\.\d+)?% of the portfolio, above the 20% single-position limit\.$/);
    const hold = recommend({ valuation: valuePositions(m, [{ asset_id: 'B', asset_type: 'bond', quantity: 1 }, { asset_id: 'CASH.EUR', asset_type: 'cash', quantity: 200 }, { asset_id: 'A', asset_type: 'equity', quantity: 0.1 }], m.dates.at(-1)!, 'EUR'), sectors: [], risk: null, riskProfile: { risk_level: 'balanced' }, restrictedAssets: [], taxConsideration: false });
    expect(hold.map((x) => x.actions[0]!.type)).toEqual(['hold']);
  });
});

describe('report', () => {
  it('localises the disclaimer by exact locale, then language, then English', () => {
    expect(disclaimer('zh-TW').jurisdiction).toBe('TW');
    expect(disclaimer('zh-HK').jurisdiction).toBe('TW');
    expect(disclaimer('en-GB').jurisdiction).toBe('GB');
    expect(disclaimer('fr-FR').jurisdiction).toBeUndefined();
  });

  it('renders only the asked sections, in order', () => {
    const result = {
      overview: { portfolio_value: 1234.5, currency: 'EUR', highlights: ['One.'] },
      holdings: { allocation: [], top_positions: [] },
      risk: { risk_level: 'balanced', metrics: { beta: 1 }, notes: ['A note.'] },
      recommendations: [],
      disclaimer: { text: 'Careful.' },
    };
    const md = renderMarkdown(result, ['risk', 'overview']);
    expect(md.split('\n').filter((l) => l.startsWith('## '))).toEqual(['## Risk', '## Overview']);
    expect(md).toContain('**Portfolio value:** 1,234.5 EUR');
    expect(md).not.toContain('Careful.');
  });
});
