// The files in deploy/ against ABC itself: every metric the Grafana dashboard
// queries is one ABC exposes.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const source = ['src/runtime/metrics.ts', 'src/main/metrics.ts', 'gateway/metrics.ts'].map((f) => readFileSync(f, 'utf8')).join('\n');
/** Names ABC registers, with the series a histogram adds. */
const exposed = new Set(
  [...source.matchAll(/name: '(abc_[a-z_]+)'|scrapedGauge\('(abc_[a-z_]+)'/g)].flatMap((m) => {
    const name = (m[1] ?? m[2])!;
    return [name, `${name}_bucket`, `${name}_sum`, `${name}_count`];
  }),
);
/** prom-client's process metrics under each prefix. */
const processMetric = /^abc_(core|gateway)_(process_|nodejs_)/;

describe('the Grafana dashboard', () => {
  const dashboard = JSON.parse(readFileSync('deploy/grafana/abc-dashboard.json', 'utf8')) as { panels: { title: string; targets: { expr: string }[] }[] };

  it('queries only metrics ABC exposes', () => {
    const queried = dashboard.panels.flatMap((p) => p.targets.flatMap((t) => [...t.expr.matchAll(/\b(abc_[a-z0-9_]+)/g)].map((m) => m[1]!)));
    expect(queried.length).toBeGreaterThan(20);
    expect(queried.filter((name) => !exposed.has(name) && !processMetric.test(name))).toEqual([]);
  });

  it('has a panel for each family of metrics', () => {
    const text = JSON.stringify(dashboard);
    for (const name of ['abc_http_requests_total', 'abc_rpc_requests_total', 'abc_runs_finished_total', 'abc_tool_calls_total', 'abc_approval_wait_seconds', 'abc_llm_tokens_total', 'abc_event_append_seconds', 'abc_live_subscribers', 'abc_contract_queue_depth', 'abc_db_pool_connections']) {
      expect(text, name).toContain(name);
    }
  });
});
