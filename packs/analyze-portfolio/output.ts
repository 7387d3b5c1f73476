// How analyze_portfolio's step outputs become the result, the partial result a
// poller may see, and the packaged artifact.
import type { RiskReport } from './analytics.js';
import type { Recommendation } from './advice.js';
import { renderMarkdown, resultDocument, type Section } from './report.js';
import type { Valuation } from './valuation.js';
import type { AssemblyOutput, Packaged } from '../../src/ports/pack.js';

type Outputs = Record<string, unknown>;

const DEFAULT_SECTIONS: Section[] = ['overview', 'holdings', 'risk', 'recommendations', 'disclaimer'];

function spec(request: Record<string, unknown>) {
  const context = request.context as { locale?: string; risk_profile: { risk_level: 'conservative' | 'balanced' | 'growth' | 'aggressive' } };
  const output = request.output_spec as { format: 'json' | 'markdown'; detail_level: string; sections?: Section[] };
  return { locale: context.locale ?? 'zh-TW', profile: context.risk_profile.risk_level, format: output.format, detail: output.detail_level, sections: output.sections ?? DEFAULT_SECTIONS };
}

function aggregate(request: Record<string, unknown>, outputs: Outputs): Packaged {
  const s = spec(request);
  const valuation = outputs.value_positions as Valuation;
  const alloc = outputs.allocation as { allocation: never[]; top_positions: never[] };
  const perf = outputs.performance as { periods: never[] } | undefined;
  const highlights = outputs.highlights as { highlights: string[]; source: string };
  const result = resultDocument({
    valuation,
    allocation: alloc.allocation,
    topPositions: alloc.top_positions,
    risk: (outputs.risk as RiskReport | undefined) ?? null,
    profileLevel: s.profile,
    periods: perf?.periods ?? null,
    recommendations: (outputs.recommendations as { recommendations: Recommendation[] } | undefined)?.recommendations ?? [],
    highlights: highlights.highlights,
    locale: s.locale,
    sections: s.sections,
  });
  const warnings = [...valuation.unvalued.map((u) => `${u.asset_id} was not valued: ${u.reason}`), ...(valuation.notes ?? [])];
  return { result, warnings };
}

/** The sections computed so far, for pollers asking standard or detailed output. */
function partialResult(request: Record<string, unknown>, outputs: Outputs): Record<string, unknown> | null {
  if (spec(request).detail === 'summary') return null;
  const partial: Record<string, unknown> = {};
  const v = outputs.value_positions as Valuation | undefined;
  if (v) partial.overview = { portfolio_value: v.total, currency: v.currency };
  if (outputs.allocation) partial.holdings = { allocation: (outputs.allocation as { allocation: unknown }).allocation, top_positions: (outputs.allocation as { top_positions: unknown }).top_positions };
  if (outputs.risk) partial.risk = { metrics: (outputs.risk as RiskReport).metrics, notes: (outputs.risk as RiskReport).notes };
  if (outputs.performance) partial.performance = { periods: (outputs.performance as { periods: unknown }).periods };
  if (outputs.recommendations) partial.recommendations = (outputs.recommendations as { recommendations: unknown }).recommendations;
  return Object.keys(partial).length ? partial : null;
}

/** The artifact in `output_spec.format`. */
function render(request: Record<string, unknown>, result: Record<string, unknown>, outputs: Outputs): { content: string; mediaType: string } {
  const s = spec(request);
  if (s.format === 'markdown') {
    const attribution = (outputs.performance as { attribution?: { asset_id: string; contribution_pct: number }[] } | undefined)?.attribution ?? [];
    const include = (request.context as { analysis_scope?: { include_attribution?: boolean } }).analysis_scope?.include_attribution ?? false;
    return { content: renderMarkdown(result, s.sections, include ? attribution : []), mediaType: 'text/markdown; charset=utf-8' };
  }
  return { content: JSON.stringify(result), mediaType: 'application/json' };
}

export const OUTPUT: AssemblyOutput = { aggregate, partialResult, render };
