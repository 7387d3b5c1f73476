// Aggregation and packaging of the analyze_portfolio result: the result
// document (valid against the contract's result schema), highlights, the
// localised disclaimer, and the markdown rendering.
import type { Bucket, Dimension, PeriodRange, RiskLevel, RiskReport } from './analytics.js';
import type { Recommendation } from './advice.js';
import type { Valuation } from './valuation.js';

export type DetailLevel = 'summary' | 'standard' | 'detailed';
export type Section = 'overview' | 'holdings' | 'risk' | 'performance' | 'attribution' | 'recommendations' | 'disclaimer';

export const DETAIL = {
  summary: { topPositions: 3, dimensions: ['asset_class'] as Dimension[], highlights: 2 },
  standard: { topPositions: 5, dimensions: ['asset_class', 'sector', 'region', 'currency'] as Dimension[], highlights: 3 },
  detailed: { topPositions: 10, dimensions: ['asset_class', 'sector', 'region', 'currency'] as Dimension[], highlights: 5 },
} as const;

const DISCLAIMERS: Record<string, { text: string; jurisdiction?: string }> = {
  'zh-TW': { text: '本報告僅供參考，不構成任何投資建議或要約。投資涉及風險，過去績效不代表未來表現，請審慎評估並諮詢專業顧問。', jurisdiction: 'TW' },
  'zh-CN': { text: '本报告仅供参考，不构成任何投资建议或要约。投资有风险，过往业绩不代表未来表现，请审慎评估并咨询专业顾问。', jurisdiction: 'CN' },
  'en-US': { text: 'This report is for information only and is not investment advice or an offer. Investing involves risk; past performance does not guarantee future results. Consult a qualified adviser.', jurisdiction: 'US' },
  'en-GB': { text: 'This report is for information only and is not investment advice or an offer. The value of investments can fall as well as rise; past performance is not a reliable indicator of future results.', jurisdiction: 'GB' },
  en: { text: 'This report is for information only and is not investment advice or an offer. Investing involves risk; past performance does not guarantee future results.' },
};

/** The disclaimer for a locale: exact match, then language, then English. */
export function disclaimer(locale: string): { text: string; jurisdiction?: string } {
  return DISCLAIMERS[locale] ?? DISCLAIMERS[locale.split('-')[0]!] ?? (locale.startsWith('zh') ? DISCLAIMERS['zh-TW']! : DISCLAIMERS.en!);
}

const fmt = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 2 });

/** Deterministic highlights, most important first. */
export function highlights(v: Valuation, risk: RiskReport | null, periods: { range: PeriodRange; return_pct: number }[], recs: Recommendation[], n: number): string[] {
  const valued = v.positions.filter((p) => p.value !== null);
  const top = [...valued].sort((a, b) => b.weight_pct - a.weight_pct)[0];
  const lines = [`Portfolio value ${fmt(v.total)} ${v.currency} across ${valued.length} valued positions as of ${v.as_of}.`];
  if (top) lines.push(`Largest position: ${top.asset_id} at ${top.weight_pct}%.`);
  if (risk?.metrics.volatility_annualized !== undefined) lines.push(`Annualised volatility ${risk.metrics.volatility_annualized}% (${risk.assessed_level} risk).`);
  const y = periods.find((p) => p.range === '1y');
  if (y) lines.push(`One-year return of current holdings: ${y.return_pct}%.`);
  const actionable = recs.filter((r) => r.actions.some((a) => a.type !== 'hold'));
  lines.push(actionable.length ? `${actionable.length} recommendation(s): ${actionable.map((r) => r.title).join('; ')}.` : 'No rebalancing needed.');
  if (v.unvalued.length) lines.push(`${v.unvalued.length} position(s) could not be valued: ${v.unvalued.map((u) => u.asset_id).join(', ')}.`);
  return lines.slice(0, n);
}

export interface AnalysisParts {
  valuation: Valuation;
  allocation: { dimension: Dimension; buckets: Bucket[] }[];
  topPositions: { asset_id: string; name: string; weight_pct: number }[];
  risk: RiskReport | null;
  profileLevel: RiskLevel;
  periods: { range: PeriodRange; return_pct: number }[] | null;
  recommendations: Recommendation[];
  highlights: string[];
  locale: string;
  sections: Section[];
}

/** The result document. Required sections are always present; `performance` only when asked for. */
export function resultDocument(a: AnalysisParts): Record<string, unknown> {
  const d = disclaimer(a.locale);
  return {
    overview: { portfolio_value: a.valuation.total, currency: a.valuation.currency, highlights: a.highlights },
    holdings: { allocation: a.allocation, top_positions: a.topPositions },
    risk: {
      risk_level: a.risk?.assessed_level ?? a.profileLevel,
      metrics: a.risk?.metrics ?? {},
      notes: a.risk ? a.risk.notes : ['Risk analysis was not requested (analysis_scope.include_risk is false).'],
    },
    ...(a.periods && a.sections.includes('performance') && { performance: { periods: a.periods } }),
    recommendations: a.recommendations,
    disclaimer: { text: d.text, ...(d.jurisdiction && { jurisdiction: d.jurisdiction }) },
  };
}

interface ResultDoc {
  overview: { portfolio_value: number; currency: string; highlights: string[] };
  holdings: { allocation: { dimension: string; buckets: Bucket[] }[]; top_positions: { asset_id: string; name: string; weight_pct: number }[] };
  risk: { risk_level: string; metrics: Record<string, number>; notes: string[] };
  performance?: { periods: { range: string; return_pct: number }[] };
  recommendations: Recommendation[];
  disclaimer: { text: string; jurisdiction?: string };
}

const METRIC_LABELS: Record<string, string> = {
  volatility_annualized: 'Annualised volatility (%)',
  max_drawdown_pct: 'Maximum drawdown (%)',
  var_95_pct: 'VaR 95, one day (%)',
  beta: 'Beta',
};

/** Renders the result as markdown, in the order and selection of `sections`. */
export function renderMarkdown(result: Record<string, unknown>, sections: Section[], attributionRows: { asset_id: string; contribution_pct: number }[] = []): string {
  const r = result as unknown as ResultDoc;
  const out: string[] = ['# Portfolio analysis', ''];
  const table = (head: string[], rows: (string | number)[][]) => [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`), ''];
  for (const s of sections) {
    if (s === 'overview') out.push('## Overview', '', `**Portfolio value:** ${fmt(r.overview.portfolio_value)} ${r.overview.currency}`, '', ...r.overview.highlights.map((h) => `- ${h}`), '');
    if (s === 'holdings') {
      out.push('## Holdings', '', ...table(['Asset', 'Name', 'Weight %'], r.holdings.top_positions.map((p) => [p.asset_id, p.name, p.weight_pct])));
      for (const a of r.holdings.allocation) out.push(`### By ${a.dimension.replace('_', ' ')}`, '', ...table(['Bucket', 'Weight %'], a.buckets.map((b) => [b.name, b.weight_pct])));
    }
    if (s === 'risk') {
      out.push('## Risk', '', `**Risk level:** ${r.risk.risk_level}`, '');
      const metrics = Object.entries(r.risk.metrics);
      if (metrics.length) out.push(...table(['Metric', 'Value'], metrics.map(([k, v]) => [METRIC_LABELS[k] ?? k, v])));
      out.push(...r.risk.notes.map((n) => `> ${n}`), '');
    }
    if (s === 'performance' && r.performance) out.push('## Performance', '', ...table(['Period', 'Return %'], r.performance.periods.map((p) => [p.range, p.return_pct])));
    if (s === 'attribution' && attributionRows.length) out.push('## Attribution (one year)', '', ...table(['Asset', 'Contribution (pp)'], attributionRows.map((x) => [x.asset_id, x.contribution_pct])));
    if (s === 'recommendations') {
      out.push('## Recommendations', '');
      for (const rec of r.recommendations) {
        out.push(`### ${rec.title}`, '', ...rec.rationale.map((x) => `- ${x}`), '', ...rec.actions.map((a) => `- **${a.type}**: ${a.description}`), '');
      }
    }
    if (s === 'disclaimer') out.push('---', '', `*${r.disclaimer.text}*${r.disclaimer.jurisdiction ? ` (${r.disclaimer.jurisdiction})` : ''}`, '');
  }
  return out.join('\n').trimEnd() + '\n';
}
