// Explainable recommendation rules. Each rule that fires yields a
// recommendation whose rationale cites the numbers that made it fire.
import { RISK_LEVELS, type Bucket, type RiskLevel, type RiskReport } from './analytics.js';
import { round, type Valuation } from './valuation.js';

export const CONCENTRATION_LIMIT_PCT = 20;
export const SECTOR_LIMIT_PCT = 40;

export type ActionType = 'rebalance' | 'reduce_concentration' | 'hedge' | 'tax_optimize' | 'diversify' | 'hold';

export interface Recommendation {
  title: string;
  rationale: string[];
  actions: { type: ActionType; description: string }[];
}

export interface AdviceInput {
  valuation: Valuation;
  sectors: Bucket[];
  risk: RiskReport | null;
  riskProfile: { risk_level: RiskLevel; max_drawdown_pct?: number };
  restrictedAssets: string[];
  taxConsideration: boolean;
}

export function recommend(input: AdviceInput): Recommendation[] {
  const out: Recommendation[] = [];
  const { valuation, risk, riskProfile } = input;
  const held = valuation.positions.filter((p) => p.value !== null);

  const restricted = held.filter((p) => input.restrictedAssets.includes(p.asset_id));
  if (restricted.length) {
    out.push({
      title: 'Exit restricted holdings',
      rationale: restricted.map((p) => `${p.asset_id} is on the restricted list and makes up ${p.weight_pct}% of the portfolio.`),
      actions: restricted.map((p) => ({ type: 'rebalance', description: `Sell ${p.asset_id} (${p.name}) and reinvest within policy.` })),
    });
  }

  for (const p of held.filter((x) => x.weight_pct > CONCENTRATION_LIMIT_PCT && x.asset_type !== 'cash' && !input.restrictedAssets.includes(x.asset_id))) {
    out.push({
      title: `Reduce concentration in ${p.asset_id}`,
      rationale: [`${p.asset_id} is ${p.weight_pct}% of the portfolio, above the ${CONCENTRATION_LIMIT_PCT}% single-position limit.`],
      actions: [{ type: 'reduce_concentration', description: `Trim ${p.asset_id} towards ${CONCENTRATION_LIMIT_PCT}% (about ${round(p.weight_pct - CONCENTRATION_LIMIT_PCT, 2)} percentage points).` }],
    });
  }

  const sector = input.sectors.find((b) => b.weight_pct > SECTOR_LIMIT_PCT && b.name !== 'Cash');
  if (sector) {
    out.push({
      title: `Diversify away from ${sector.name}`,
      rationale: [`${sector.name} is ${sector.weight_pct}% of the portfolio, above the ${SECTOR_LIMIT_PCT}% sector limit.`],
      actions: [{ type: 'diversify', description: `Add exposure outside ${sector.name} to bring it under ${SECTOR_LIMIT_PCT}%.` }],
    });
  }

  if (risk?.assessed_level && RISK_LEVELS.indexOf(risk.assessed_level) > RISK_LEVELS.indexOf(riskProfile.risk_level)) {
    out.push({
      title: `Bring risk back to the ${riskProfile.risk_level} profile`,
      rationale: [
        `Annualised volatility is ${risk.metrics.volatility_annualized}%, which is ${risk.assessed_level} risk; the client profile is ${riskProfile.risk_level}.`,
      ],
      actions: [{ type: 'rebalance', description: 'Shift weight from high-volatility holdings to fixed income or cash.' }],
    });
  }

  const dd = risk?.metrics.max_drawdown_pct;
  if (dd !== undefined && riskProfile.max_drawdown_pct !== undefined && dd > riskProfile.max_drawdown_pct) {
    out.push({
      title: 'Limit drawdown',
      rationale: [`The maximum drawdown over the window was ${dd}%, beyond the client's ${riskProfile.max_drawdown_pct}% tolerance.`],
      actions: [{ type: 'hedge', description: 'Hedge equity exposure or raise the defensive allocation.' }],
    });
  }

  if (input.taxConsideration) {
    const losses = held.filter((p) => p.cost_basis !== undefined && p.asset_type !== 'cash' && (p.local_value ?? Infinity) < p.cost_basis!);
    if (losses.length) {
      out.push({
        title: 'Harvest tax losses',
        rationale: losses.map((p) => `${p.asset_id} is below its cost basis (${round(p.local_value!, 2)} vs ${p.cost_basis} ${p.currency}).`),
        actions: losses.map((p) => ({ type: 'tax_optimize', description: `Realise the loss on ${p.asset_id} to offset gains, respecting wash-sale rules.` })),
      });
    }
    if (out.some((r) => r.actions.some((a) => a.type === 'reduce_concentration' || a.type === 'rebalance'))) {
      out.push({
        title: 'Stagger sales for tax efficiency',
        rationale: ['Tax consideration is on and the recommendations above involve selling.'],
        actions: [{ type: 'tax_optimize', description: 'Spread sales across tax years and sell high-basis lots first.' }],
      });
    }
  }

  if (out.length === 0) {
    out.push({
      title: 'Hold the current allocation',
      rationale: [`No position exceeds ${CONCENTRATION_LIMIT_PCT}%, no sector exceeds ${SECTOR_LIMIT_PCT}%, and risk fits the ${riskProfile.risk_level} profile.`],
      actions: [{ type: 'hold', description: 'Keep the allocation and review at the next scheduled date.' }],
    });
  }
  return out;
}
