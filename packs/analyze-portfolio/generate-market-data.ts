// Generates the sample market data set in data/market: synthetic daily closes
// (a seeded one-factor model, so betas and correlations are realistic) for a
// handful of assets, one benchmark and two FX rates. Deterministic: re-running
// it reproduces the committed files byte for byte. Usage: tsx scripts/generate-market-data.ts
import { writeFileSync } from 'node:fs';

interface Spec { id: string; start: number; drift: number; vol: number; beta: number; from?: string }

const SERIES: Spec[] = [
  { id: 'ACWI', start: 85, drift: 0.08, vol: 0.15, beta: 1 },
  { id: 'AAPL', start: 130, drift: 0.14, vol: 0.27, beta: 1.2 },
  { id: 'MSFT', start: 240, drift: 0.13, vol: 0.25, beta: 1.1 },
  { id: 'JNJ', start: 170, drift: 0.03, vol: 0.16, beta: 0.55 },
  { id: '2330.TW', start: 450, drift: 0.22, vol: 0.3, beta: 1.3 },
  { id: '0050.TW', start: 110, drift: 0.11, vol: 0.19, beta: 0.95 },
  { id: 'SAP.DE', start: 95, drift: 0.17, vol: 0.24, beta: 1.05 },
  { id: 'BND', start: 72, drift: 0.01, vol: 0.06, beta: 0.1 },
  { id: 'GLD', start: 170, drift: 0.09, vol: 0.14, beta: 0.15 },
  { id: 'BTC', start: 17000, drift: 0.45, vol: 0.6, beta: 1.6, from: '2024-01-02' },
  { id: 'FX:TWD', start: 0.0327, drift: 0, vol: 0.05, beta: 0 },
  { id: 'FX:EUR', start: 1.07, drift: 0.01, vol: 0.07, beta: 0 },
];

function mulberry32(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = mulberry32(20240101);
const gauss = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());

const dates: string[] = [];
for (let d = new Date('2023-01-02T00:00:00Z'); d <= new Date('2026-11-20T00:00:00Z'); d.setUTCDate(d.getUTCDate() + 1)) {
  if (d.getUTCDay() !== 0 && d.getUTCDay() !== 6) dates.push(d.toISOString().slice(0, 10));
}

const dt = 1 / 252;
const market = SERIES[0]!;
const price = new Map(SERIES.map((s) => [s.id, s.start]));
const rows = [['date', ...SERIES.map((s) => s.id)].join(',')];
for (const [i, date] of dates.entries()) {
  const m = gauss();
  const cells = SERIES.map((s) => {
    if (i > 0) {
      const systematic = s.beta * market.vol * m;
      const idio = Math.sqrt(Math.max(s.vol ** 2 - (s.beta * market.vol) ** 2, 0.0001)) * gauss();
      const r = (s.drift - s.vol ** 2 / 2) * dt + (s === market ? market.vol * m : systematic + idio) * Math.sqrt(dt);
      price.set(s.id, price.get(s.id)! * Math.exp(r));
    }
    if (s.from && date < s.from) return '';
    const p = price.get(s.id)!;
    return s.id.startsWith('FX:') ? p.toFixed(6) : p.toFixed(p > 1000 ? 2 : 4);
  });
  rows.push([date, ...cells].join(','));
}
writeFileSync('data/market/closes.csv', rows.join('\n') + '\n');
console.log(`wrote ${dates.length} days x ${SERIES.length} series`);
