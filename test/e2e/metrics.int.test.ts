// Prometheus metrics: the gateway's /metrics (an operator key) serves its own
// and the core's in the text exposition format, a standalone core serves its
// own on ABC_METRICS_ADDR, counters move with a run and a tool call, and no
// label carries an id.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeys } from '../../src/access/api-keys.js';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';
import { freePort } from '../support/ports.js';

let s: TestStack;
let agent: FakeAgent;
let metricsPort: number;
let clientKey: string;
let otherOperator: string; // an operator key of another tenant


beforeAll(async () => {
  metricsPort = await freePort();
  s = await startTestStack({ metricsAddr: { host: '127.0.0.1', port: metricsPort } });
  const keys = new ApiKeys(s.orm);
  clientKey = (await keys.create('app', { scopes: ['client'] })).key;
  await keys.createTenant('acme');
  otherOperator = (await keys.create('acme-ops', { tenantId: 'acme', scopes: ['operator'] })).key;
  agent = await startFakeAgent(async (inv, res) => {
    const token = String(inv.headers['x-abc-run-token']);
    await fetch(`${s.url}/v1/tools/echo:invoke`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ run_id: inv.body.run_id, args: { x: 1 } }) });
    sse(res, 'delta', { text: 'done' });
    sse(res, 'done', { usage: { prompt_tokens: 1, completion_tokens: 1 } });
    res.end();
  });
  expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'counted', name: 'Counted', endpoint: agent.url } })).status).toBe(200);
});
afterAll(async () => {
  await agent?.close();
  await s?.close();
});

/** A text exposition as `name{labels}` → value; every sample line must parse. */
function parse(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    // Values as Prometheus reads them: floats, and NaN or Inf in any case.
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?) (-?[0-9.e+-]+|[+-]?inf|nan)$/i.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    samples.set(m[1]!, Number(m[2]));
  }
  return samples;
}
const scrape = async () => {
  const res = await s.http('/metrics');
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/plain');
  return { text: await res.text() };
};
const value = (samples: Map<string, number>, key: string) => samples.get(key) ?? 0;

describe('/metrics', () => {
  it("serves the gateway's and the core's metrics to the default tenant's operators, and no one else", async () => {
    const { text } = await scrape();
    const samples = parse(text);
    for (const name of ['abc_gateway_process_cpu_user_seconds_total', 'abc_core_process_cpu_user_seconds_total', 'abc_core_nodejs_eventloop_lag_seconds']) expect(samples.has(name), name).toBe(true);
    expect(text).toContain('# TYPE abc_http_requests_total counter');
    expect(text).toContain('# TYPE abc_rpc_duration_seconds histogram');
    expect([...samples.keys()].some((k) => k.startsWith('abc_db_pool_connections{pool="orm",state="total"}'))).toBe(true);
    expect(samples.has('abc_contract_queue_depth')).toBe(true);
    expect((await s.http('/metrics', { key: null })).status).toBe(401);
    expect((await s.http('/metrics', { key: clientKey })).status).toBe(403);
    // The figures are the whole platform's (every tenant's tool and model names): not another tenant's to read.
    expect((await s.http('/metrics', { key: otherOperator })).status).toBe(403);
  });

  it('counts a run, its tool call, its events and its RPCs', async () => {
    const before = parse((await scrape()).text);
    const ws = await new WsClient(s.url).open();
    ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
    ws.send({ type: 'agent_invoke', session_id: `sess_metrics_${Date.now()}`, agent_id: 'counted', message: { role: 'user', content: 'go' } });
    await ws.next('done');
    ws.close();
    await expect.poll(async () => value(parse((await scrape()).text), 'abc_runs_finished_total{status="DONE"}') - value(before, 'abc_runs_finished_total{status="DONE"}')).toBe(1);
    const after = parse((await scrape()).text);
    expect(value(after, 'abc_runs_started_total') - value(before, 'abc_runs_started_total')).toBe(1);
    expect(value(after, 'abc_tool_calls_total{tool="echo",outcome="succeeded"}') - value(before, 'abc_tool_calls_total{tool="echo",outcome="succeeded"}')).toBe(1);
    expect(value(after, 'abc_run_duration_seconds_count{status="DONE"}')).toBeGreaterThan(value(before, 'abc_run_duration_seconds_count{status="DONE"}'));
    expect(value(after, 'abc_event_append_batch_size_count')).toBeGreaterThan(value(before, 'abc_event_append_batch_size_count'));
    const connect = '/abc.ingress.v1.IngressService/Connect';
    expect(value(after, `abc_rpc_requests_total{method="${connect}",code="OK"}`) + value(after, `abc_rpc_requests_total{method="${connect}",code="CANCELLED"}`)).toBeGreaterThan(0);
    // The route is its pattern, whatever the tool.
    const invoked = 'abc_http_requests_total{route="/v1/tools/{name}:invoke",method="POST",status="200"}';
    expect(value(after, invoked) - value(before, invoked)).toBe(1);
  });

  it('keeps labels bounded: no id in any of them', async () => {
    const { text } = await scrape();
    const labelled = text.split('\n').filter((l) => !l.startsWith('#') && l.includes('{'));
    expect(labelled.length).toBeGreaterThan(20);
    expect(labelled.filter((l) => /"(run|sess|tc|ap|tkt|llm|evt)_[0-9a-z]{6,}/.test(l))).toEqual([]);
  });
});

describe("a standalone core's metrics port", () => {
  it('serves the core’s metrics on ABC_METRICS_ADDR without a credential', async () => {
    const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(res.status).toBe(200);
    const samples = parse(await res.text());
    expect(samples.get('abc_runs_started_total')).toBeGreaterThanOrEqual(1);
    expect((await fetch(`http://127.0.0.1:${metricsPort}/other`)).status).toBe(404);
  });
});
