// The webhook tools of the reference workflow `wealth-onboarding` (seed 003):
// one HTTP server answering ABC's http tool calls for every tool its phases
// use. The market and the broker are simulated, deterministically, so the
// workflow can be walked end to end anywhere; a real deployment points the
// same tool names at its own services. Nothing here is part of ABC.
//   PORT=9201 npx tsx examples/wealth-onboarding/tools.ts
// then register tools.json (ABC_TOOLS_FILE, or POST /v1/tools/register each).
import http from 'node:http';
import type { AddressInfo } from 'node:net';

type Args = Record<string, any>;

/** A number from a string, stable across runs. */
function seed(text: string): number {
  let h = 2166136261;
  for (const c of text) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  return (h >>> 0) / 2 ** 32;
}

const round = (n: number, digits = 2) => Number(n.toFixed(digits));

export const TOOLS: Record<string, (args: Args) => unknown> = {
  /** A quote with 30 days of closes. */
  'market.quote': ({ symbol }) => {
    const s = seed(String(symbol));
    const price = round(20 + s * 480);
    return { symbol, currency: 'USD', price, series: Array.from({ length: 30 }, (_, i) => round(price * (1 + 0.02 * Math.sin(i / 3 + s * 10)))) };
  },
  /** Checks a strategy's rule against the client's risk tolerance. */
  'strategy.validate': ({ instrument, rule, risk_tolerance = 'medium' }) => {
    const leveraged = /leverag|margin|short/i.test(String(rule ?? ''));
    const warnings = leveraged && risk_tolerance !== 'high' ? ['the rule uses leverage, above the client’s risk tolerance'] : [];
    return { strategy_id: `s-${Math.floor(seed(`${instrument}:${rule}`) * 1e6)}`, instrument, rule, valid: warnings.length === 0, warnings };
  },
  /** A simulated backtest over `years`. */
  'strategy.backtest': ({ strategy_id, years = 5 }) => {
    const s = seed(String(strategy_id));
    const curve = Array.from({ length: years * 12 }, (_, m) => round(10_000 * (1 + 0.006 * m + 0.04 * Math.sin(m / 4 + s * 7))));
    return { strategy_id, status: 'completed', years, total_return: round(curve.at(-1)! / 10_000 - 1, 4), max_drawdown: round(0.05 + s * 0.2, 4), sharpe: round(0.6 + s, 2), equity_curve: curve };
  },
  /** The stress scenarios proposed for a strategy. */
  'stress.scenarios': ({ strategy_id }) => ({
    scenario_set_id: `sc-${Math.floor(seed(String(strategy_id)) * 1e6)}`,
    scenarios: [
      { id: 'rates_up_200bp', label: 'Rates up 200 bp' },
      { id: 'equity_crash_30', label: 'Equities down 30 %' },
      { id: 'usd_up_15', label: 'Dollar up 15 %' },
    ],
  }),
  /** Runs the scenarios: a loss per scenario and the worst. */
  'stress.run': ({ scenario_set_id, strategy_id }) => {
    const s = seed(`${scenario_set_id}:${strategy_id}`);
    const results = [['rates_up_200bp', 0.04], ['equity_crash_30', 0.22], ['usd_up_15', 0.06]].map(([id, base]) => ({ scenario: id, loss: round((base as number) * (0.7 + s * 0.6), 4) }));
    return { stress_report_id: `sr-${Math.floor(s * 1e6)}`, scenario_set_id, results, worst_loss: Math.max(...results.map((r) => r.loss)) };
  },
  /** The broker's risk guard: blocks a deployment above the account's limit. */
  'deploy.check_risk_guard': ({ strategy_id, target = 'paper', amount = 0 }) =>
    target === 'live' && Number(amount) > 100_000
      ? { strategy_id, target, risk_guard_status: 'blocked', blocker_code: 'AMOUNT_ABOVE_LIMIT', limit: 100_000 }
      : { strategy_id, target, risk_guard_status: 'ok' },
  /** Deploys: a receipt, and the deployment's status. */
  'deploy.execute': ({ strategy_id, target = 'paper' }) => ({
    deployment_id: `d-${Math.floor(seed(`${strategy_id}:${target}`) * 1e6)}`,
    strategy_id,
    target,
    deployment_status: 'deployed',
    receipt_id: `r-${Math.floor(seed(String(strategy_id)) * 1e9)}`,
  }),
};

/** The webhook: ABC posts `{tool, args, tool_call_id, run_id}`; a 2xx JSON body is the result. */
export function createWealthTools(): http.Server {
  return http.createServer(async (req, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const send = (status: number, doc: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(doc));
    let body: { tool?: string; args?: Args };
    try {
      body = JSON.parse(raw);
    } catch {
      return send(400, { error: { code: 'BAD_REQUEST', message: 'the body is not JSON', retryable: false } });
    }
    const tool = TOOLS[String(body.tool)];
    if (!tool) return send(404, { error: { code: 'UNKNOWN_TOOL', message: `no tool ${body.tool} here`, retryable: false } });
    send(200, tool(body.args ?? {}));
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const server = createWealthTools().listen(Number(process.env.PORT ?? 9201), '127.0.0.1', () => {
    console.log(`wealth-onboarding tools on http://127.0.0.1:${(server.address() as AddressInfo).port}/tools`);
  });
}
