// The business contract API end to end (seed 000): gateway → gRPC → core → queue worker.
import { status } from '@grpc/grpc-js';
import { SubmitContractRequest } from '../../gen/abc/ingress/v1/ingress.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { tableDigest } from '../support/digest.js';
import { failure, unary, withKey } from '../support/grpc.js';
import { ErrorMessage } from '../support/error-message.js';
import { contract, importSamplePortfolios, pollUntilDone, registry, request } from '../support/contracts.js';

let s: TestStack;

beforeAll(async () => {
  s = await startTestStack({ contracts: { workers: 2, leaseMs: 1000 } });
  await importSamplePortfolios(s.orm);
});
afterAll(async () => s?.close());

const submit = (body: unknown) => s.http('/v1/contracts:submit', { method: 'POST', json: body });
const valid = (kind: 'submit-response' | 'poll-response' | 'result' | 'error', doc: unknown) => expect(registry.validateResponse(contract, kind, doc)).toEqual({ ok: true });

async function runToEnd(body: Record<string, any>) {
  const res = await submit(body);
  const accepted = await res.json();
  expect(res.status, JSON.stringify(accepted)).toBe(202);
  valid('submit-response', accepted);
  const done = await pollUntilDone(s.http, accepted.task.ticket);
  valid('poll-response', done);
  return done;
}

describe('submit and poll', () => {
  it('accepts async with a ticket, and the poll reaches SUCCEEDED with a schema-valid result', async () => {
    const res = await submit(request());
    expect(res.headers.get('x-abc-ticket')).toMatch(/^tkt_/);
    const body = await res.json();
    valid('submit-response', body);
    expect(body).toMatchObject({ kind: 'task', contract: { contract_id: 'com.thaleon.wm:analyze-portfolio', version: '1.0.0' }, task: { status: 'QUEUED', ttl_seconds: 3 } });
    expect(body.task.poll_hint_ms).toBeGreaterThan(0);
    const done = await pollUntilDone(s.http, body.task.ticket);
    valid('poll-response', done);
    expect(done).toMatchObject({ status: 'SUCCEEDED', progress: { phase: 'done', percent: 100 } });
    expect(done.error).toBeUndefined();
    valid('result', done.result);
    expect(done.result.overview.currency).toBe('USD');
    expect(done.result.overview.portfolio_value).toBeGreaterThan(0);
    expect(done.result.holdings.allocation.map((a: { dimension: string }) => a.dimension)).toEqual(['asset_class', 'sector', 'region', 'currency']);
    expect(Object.keys(done.result.risk.metrics).sort()).toEqual(['beta', 'max_drawdown_pct', 'var_95_pct', 'volatility_annualized']);
    // A finished answer is final: it may be cached until the ticket expires.
    expect(done.ttl_seconds).toBeGreaterThan(3);
  });

  it('answers sync with the result, and auto picks sync when the assembly fits max_latency_ms', async () => {
    for (const mode of ['sync', 'auto']) {
      const res = await submit(request({ execution_preferences: { mode, max_latency_ms: 10_000 } }));
      const body = await res.json();
      expect(res.status, JSON.stringify(body)).toBe(200);
      valid('submit-response', body);
      expect(body.kind).toBe('result');
      expect(body.warnings).toEqual([]);
      valid('result', body.result);
      // The document keeps the order of the contract's schema.
      expect(Object.keys(body.result)).toEqual(['overview', 'holdings', 'risk', 'recommendations', 'disclaimer']);
    }
  });

  it('auto answers with a ticket when the assembly is expected to take longer than max_latency_ms', async () => {
    const res = await submit(request({ execution_preferences: { mode: 'auto', max_latency_ms: 50 } }));
    expect(res.status).toBe(202);
    expect((await res.json()).kind).toBe('task');
  });

  it('gives the same structure and the same plan_hash for the same input (golden)', async () => {
    const a = await runToEnd(request({ context: { analysis_scope: { include_attribution: true } } }));
    const b = await runToEnd(request({ context: { analysis_scope: { include_attribution: true } } }));
    expect(b.result).toEqual(a.result);
    const hashes = await s.orm.em.fork().execute<{ plan_hash: string }[]>('SELECT plan_hash FROM frozen_plans WHERE ticket IN (?, ?)', [a.ticket, b.ticket]);
    expect(hashes).toHaveLength(2);
    expect(hashes[0]!.plan_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(hashes[1]!.plan_hash).toBe(hashes[0]!.plan_hash);
  });

  it('shows every step at progress_granularity step, and none at none', async () => {
    const stepped = await runToEnd(request({ execution_preferences: { progress_granularity: 'step' } }));
    expect(stepped.progress.steps.map((x: { step_id: string }) => x.step_id)).toEqual([
      'load_portfolio', 'value_positions', 'allocation', 'risk', 'performance', 'recommendations', 'highlights',
    ]);
    for (const step of stepped.progress.steps) {
      expect(step).toMatchObject({ status: 'SUCCEEDED' });
      expect(Date.parse(step.ended_at)).toBeGreaterThanOrEqual(Date.parse(step.started_at));
    }
    const none = await runToEnd(request({ execution_preferences: { progress_granularity: 'none' } }));
    expect(none.progress).toEqual({ phase: 'done', percent: 100 });
  });

  it('skips steps the analysis scope leaves out', async () => {
    const done = await runToEnd(request({ context: { analysis_scope: { include_risk: false, include_performance: false } }, output_spec: { sections: ['overview', 'performance'] }, execution_preferences: { progress_granularity: 'step' } }));
    const status = Object.fromEntries(done.progress.steps.map((x: { step_id: string; status: string }) => [x.step_id, x.status]));
    expect(status).toMatchObject({ risk: 'SKIPPED', performance: 'SKIPPED', recommendations: 'SUCCEEDED' });
    expect(done.result.risk.metrics).toEqual({});
    expect(done.result.performance).toBeUndefined();
  });

  it('includes performance when the sections ask for it', async () => {
    const done = await runToEnd(request({ output_spec: { sections: ['overview', 'holdings', 'risk', 'performance', 'recommendations', 'disclaimer'] } }));
    expect(done.result.performance.periods.map((p: { range: string }) => p.range)).toEqual(['1m', '3m', '6m', '1y', '3y', 'ytd']);
  });

  it('follows the locale in the disclaimer (zh-TW by default)', async () => {
    const done = await runToEnd(request({ context: { locale: null } }));
    expect(done.result.disclaimer).toMatchObject({ jurisdiction: 'TW' });
    expect(done.result.disclaimer.text).toContain('投資');
  });

  it('renders markdown in the order of output_spec.sections', async () => {
    const done = await runToEnd(
      request({
        context: { analysis_scope: { include_attribution: true } },
        output_spec: { format: 'markdown', detail_level: 'detailed', sections: ['overview', 'risk', 'attribution', 'recommendations', 'disclaimer'] },
      }),
    );
    valid('result', done.result);
    const res = await s.http(`/v1/tickets/${done.ticket}/artifact`);
    expect(res.headers.get('content-type')).toBe('text/markdown; charset=utf-8');
    const md = await res.text();
    const headings = md.split('\n').filter((l) => l.startsWith('## '));
    expect(headings).toEqual(['## Overview', '## Risk', '## Attribution (one year)', '## Recommendations']);
    expect(md).toContain('| Annualised volatility (%) |');
    expect(md).toContain(`${done.result.overview.portfolio_value.toLocaleString('en-US', { maximumFractionDigits: 2 })} USD`);
    expect(md).toContain(done.result.disclaimer.text);
  });

  it('fails an unknown portfolio_ref with DATA_SOURCE, not retryable, sync and async', async () => {
    const body = request({ input: { portfolio_ref: { portfolio_id: 'pf-nope' } }, execution_preferences: { mode: 'sync', max_latency_ms: 10_000 } });
    const res = await submit(body);
    const sync = await res.json();
    expect(res.status).toBe(404);
    valid('error', sync.error);
    expect(sync.error).toMatchObject({ code: 'PORTFOLIO_NOT_FOUND', category: 'DATA_SOURCE', retryable: false });
    expect(sync.error.trace_id).toMatch(/^[0-9a-f]{32}$/);

    const done = await runToEnd(request({ input: { portfolio_ref: { portfolio_id: 'pf-nope' } }, execution_preferences: { progress_granularity: 'step' } }));
    expect(done.status).toBe('FAILED');
    expect(done.result).toBeUndefined();
    expect(done.error).toMatchObject({ code: 'PORTFOLIO_NOT_FOUND', category: 'DATA_SOURCE', retryable: false });
    expect(done.progress.phase).toBe('execute');
    const status = Object.fromEntries(done.progress.steps.map((x: { step_id: string; status: string }) => [x.step_id, x.status]));
    expect(status).toMatchObject({ load_portfolio: 'FAILED', value_positions: 'SKIPPED', highlights: 'SKIPPED' });
  });

  it('never invents numbers: positions without prices are named and lower what is computed', async () => {
    const done = await runToEnd(
      request({
        input: {
          portfolio_ref: null,
          positions: [
            { asset_id: 'AAPL', asset_type: 'equity', quantity: 10 },
            { asset_id: 'NEWCO', asset_type: 'equity', quantity: 100, market_value: 2600, currency: 'USD' },
            { asset_id: 'MYSTERY', asset_type: 'other', quantity: 5 },
          ],
        },
      }),
    );
    expect(done.status).toBe('SUCCEEDED');
    const notes = done.result.risk.notes.join(' ');
    expect(notes).toContain('MYSTERY');
    expect(notes).toMatch(/No full price history for NEWCO; metrics cover \d+(\.\d)?% of the portfolio value/);
    expect(done.result.holdings.top_positions.map((p: { asset_id: string }) => p.asset_id)).not.toContain('MYSTERY');
  });

  it('returns the same ticket for an idempotent resubmission, and a VALIDATION conflict for a different request', async () => {
    const first = request();
    const a = await (await submit(first)).json();
    const again = { ...first, correlation: { ...first.correlation, request_id: 'req-retry-000001', sent_at: '2026-11-22T08:00:05Z' } };
    // Running or already finished, the replay names the same ticket and echoes its own correlation.
    const resB = await submit(again);
    const b = await resB.json();
    expect(resB.headers.get('x-abc-ticket')).toBe(a.task.ticket);
    expect(b.correlation.request_id).toBe('req-retry-000001');

    // Once it has finished, the same request answers with the outcome itself.
    await pollUntilDone(s.http, a.task.ticket);
    const replay = await submit({ ...first, correlation: { ...first.correlation, request_id: 'req-retry-000002' } });
    expect(replay.status).toBe(200);
    const replayed = await replay.json();
    valid('submit-response', replayed);
    expect(replayed).toMatchObject({ kind: 'result', correlation: { request_id: 'req-retry-000002' } });
    expect(replay.headers.get('x-abc-ticket')).toBe(a.task.ticket);

    const res = await submit({ ...first, context: { ...first.context, currency: 'TWD' } });
    const conflict = await res.json();
    expect(res.status).toBe(409);
    valid('error', conflict.error);
    expect(conflict.error).toMatchObject({ code: 'idempotency_conflict', category: 'VALIDATION', retryable: false, details: { pointer: '/correlation/idempotency_key', ticket: a.task.ticket } });
  });

  it('serves the same API over gRPC on IngressService', async () => {
    const body = request({ execution_preferences: { mode: 'sync', max_latency_ms: 10_000 } });
    const res = await unary(s.clients.ingress.submitContract.bind(s.clients.ingress), SubmitContractRequest.fromPartial({ body }), withKey(s.key));
    expect(res.outcome?.$case).toBe('result');
    const poll = await unary(s.clients.ingress.pollTicket.bind(s.clients.ingress), { ticket: res.ticket, waitMs: 0, noWait: true }, withKey(s.key));
    expect(poll).toMatchObject({ ticket: res.ticket, status: 'TICKET_STATUS_SUCCEEDED', progress: { phase: 'LIFECYCLE_PHASE_DONE', percent: 100 } });
    if (res.outcome?.$case === 'result') expect(poll.result).toEqual(res.outcome.value.result);
  });

  it('takes the request and answers the result as JSON text over gRPC, when asked', async () => {
    const body = request({ execution_preferences: { mode: 'sync', max_latency_ms: 10_000 } });
    const res = await unary(s.clients.ingress.submitContract.bind(s.clients.ingress), SubmitContractRequest.fromPartial({ bodyJson: Buffer.from(JSON.stringify(body)), resultAsJson: true }), withKey(s.key));
    if (res.outcome?.$case !== 'result') throw new Error(`expected a result, got ${res.outcome?.$case}`);
    expect(res.outcome.value.result).toBeUndefined();
    const result = JSON.parse(res.outcome.value.resultJson.toString('utf8'));
    valid('result', result);
    expect(res.outcome.value.correlation).toEqual({ requestId: body.correlation.request_id, sessionId: body.correlation.session_id });
    const poll = await unary(s.clients.ingress.pollTicket.bind(s.clients.ingress), { ticket: res.ticket, waitMs: 0, noWait: true }, withKey(s.key));
    expect(poll.result).toEqual(result);
  });

  it('refuses body_json beside body, body_json that is not JSON, and a "__proto__" key in it, as invalid_request', async () => {
    const body = request();
    const cases: [Partial<SubmitContractRequest>, RegExp][] = [
      [{ body, bodyJson: Buffer.from(JSON.stringify(body)) }, /not both/],
      [{ bodyJson: Buffer.from('{"contract":') }, /not valid JSON/],
      [{ bodyJson: Buffer.from('{"__proto__":{"polluted":true}}') }, /__proto__/],
      [{ bodyJson: Buffer.from('{"contract":{"\\u005f_proto__":{"polluted":true}}}') }, /__proto__/],
      // Deeper than the parser's stack.
      [{ bodyJson: Buffer.from(`{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}`) }, /nest at most 64 levels/],
    ];
    for (const [req, message] of cases) {
      const error = await failure(unary(s.clients.ingress.submitContract.bind(s.clients.ingress), SubmitContractRequest.fromPartial(req), withKey(s.key)));
      expect(error.code).toBe(status.INVALID_ARGUMENT);
      expect(ErrorMessage(error)).toMatchObject({ code: 'invalid_request', details: { field: 'body_json' } });
      expect(error.details).toMatch(message);
    }
  });

  it('checks a body_json as the boundary checks a Struct body, over gRPC and from HTTP', async () => {
    const body = request();
    const cases: [Record<string, any>, string, RegExp][] = [
      [{ ...body, context: { ...body.context, currency: 'US\u0000D' } }, 'body.context.currency', /must not contain NUL/],
      [{ ...body, execution_preferences: { mode: 'async', max_latency_ms: 2 ** 60 } }, 'body.execution_preferences.max_latency_ms', /out of range/],
    ];
    for (const [doc, field, message] of cases) {
      const error = await failure(unary(s.clients.ingress.submitContract.bind(s.clients.ingress), SubmitContractRequest.fromPartial({ bodyJson: Buffer.from(JSON.stringify(doc)) }), withKey(s.key)));
      expect(error.code).toBe(status.INVALID_ARGUMENT);
      expect(ErrorMessage(error)).toMatchObject({ code: 'invalid_request', details: { field } });
      expect(error.details).toMatch(message);
    }
    // The gateway relays an HTTP body as body_json: the same check answers 400.
    const res = await submit(cases[1]![0]);
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: 'invalid_request', details: { field: 'body.execution_preferences.max_latency_ms' } });
  });

  it('answers an unknown ticket with TICKET_NOT_FOUND and refuses a wait over 30 s', async () => {
    const missing = await s.http('/v1/tickets/tkt_missing');
    expect(missing.status).toBe(404);
    expect((await missing.json()).error).toMatchObject({ code: 'TICKET_NOT_FOUND', category: 'VALIDATION' });
    const long = await s.http('/v1/tickets/tkt_missing?wait_ms=30001');
    expect(long.status).toBe(400);
  });
});

// Each invalid request, and the JSON pointer its VALIDATION error must name.
const INVALID: [string, Record<string, any>, string][] = [
  ['no contract', { contract: null }, '/contract'],
  ['unknown contract_id', { contract: { contract_id: 'com.thaleon.wm:other' } }, '/contract/contract_id'],
  ['unknown version', { contract: { version: '9.9.9' } }, '/contract/version'],
  ['contract with an extra field', { contract: { extra: 1 } }, '/contract/extra'],
  ['wrong intent', { intent: 'rebalance' }, '/intent'],
  ['no intent', { intent: null }, '/intent'],
  ['no correlation', { correlation: null }, '/correlation'],
  ['short request_id', { correlation: { request_id: 'r1' } }, '/correlation/request_id'],
  ['short idempotency_key', { correlation: { idempotency_key: 'k' } }, '/correlation/idempotency_key'],
  ['no session_id', { correlation: { session_id: null } }, '/correlation/session_id'],
  ['sent_at not a date-time', { correlation: { sent_at: 'yesterday' } }, '/correlation/sent_at'],
  ['correlation extra field', { correlation: { user: 'bob' } }, '/correlation/user'],
  ['no context', { context: null }, '/context'],
  ['as_of not a date', { context: { as_of: '2026-13-45' } }, '/context/as_of'],
  ['no currency', { context: { currency: null } }, '/context/currency'],
  ['currency too long', { context: { currency: 'USDT' } }, '/context/currency'],
  ['unknown risk_level', { context: { risk_profile: { risk_level: 'yolo' } } }, '/context/risk_profile/risk_level'],
  ['max_drawdown_pct over 100', { context: { risk_profile: { max_drawdown_pct: 120 } } }, '/context/risk_profile/max_drawdown_pct'],
  ['analysis_scope flag not boolean', { context: { analysis_scope: { include_risk: 'yes' } } }, '/context/analysis_scope/include_risk'],
  ['restricted_assets not strings', { context: { constraints: { restricted_assets: [1] } } }, '/context/constraints/restricted_assets/0'],
  ['context extra field', { context: { mood: 'bullish' } }, '/context/mood'],
  ['input with both forms', { input: { portfolio_ref: { portfolio_id: 'p' }, positions: [] } }, '/input/positions'],
  ['portfolio_ref without id', { input: { portfolio_ref: { portfolio_id: null } } }, '/input/portfolio_ref/portfolio_id'],
  ['empty positions', { input: { portfolio_ref: null, positions: [] } }, '/input/positions'],
  ['position without quantity', { input: { portfolio_ref: null, positions: [{ asset_id: 'AAPL', asset_type: 'equity' }] } }, '/input/positions/0/quantity'],
  ['position asset_type unknown', { input: { portfolio_ref: null, positions: [{ asset_id: 'AAPL', asset_type: 'stock', quantity: 1 }] } }, '/input/positions/0/asset_type'],
  ['no output_spec', { output_spec: null }, '/output_spec'],
  ['format pdf', { output_spec: { format: 'pdf' } }, '/output_spec/format'],
  ['unknown detail_level', { output_spec: { detail_level: 'verbose' } }, '/output_spec/detail_level'],
  ['unknown section', { output_spec: { sections: ['overview', 'gossip'] } }, '/output_spec/sections/1'],
  ['unknown mode', { execution_preferences: { mode: 'later' } }, '/execution_preferences/mode'],
  ['max_latency_ms under 50', { execution_preferences: { max_latency_ms: 10 } }, '/execution_preferences/max_latency_ms'],
  ['max_latency_ms not an integer', { execution_preferences: { max_latency_ms: 100.5 } }, '/execution_preferences/max_latency_ms'],
  ['poll_long_wait_ms over 30000', { execution_preferences: { poll_long_wait_ms: 60000 } }, '/execution_preferences/poll_long_wait_ms'],
  ['unknown granularity', { execution_preferences: { progress_granularity: 'token' } }, '/execution_preferences/progress_granularity'],
  ['top-level extra field', { tools: ['shell'] }, '/tools'],
];

describe('validation', () => {
  it.each(INVALID)('refuses %s with a VALIDATION error at its pointer', async (_name, patch, pointer) => {
    const res = await submit(request(patch));
    const body = await res.json();
    expect(res.status, JSON.stringify(body)).toBe(400);
    valid('error', body.error);
    expect(body.error).toMatchObject({ category: 'VALIDATION', retryable: false, details: { pointer } });
    expect(['SCHEMA_VIOLATION', 'UNKNOWN_CONTRACT']).toContain(body.error.code);
    expect(body.error.message).toContain(pointer === '' ? '/' : pointer.split('/').slice(0, -1).join('/'));
    expect(body.error.trace_id).toMatch(/^[0-9a-f]{32}$/);
  });

  // A malformed contract reference is the schema's violation, named as ajv names one, not an unknown contract.
  it.each([
    ['not an object', { contract: 'com.thaleon.wm:analyze-portfolio' }, '/contract', 'type', '/contract must be object'],
    ['an array', { contract: [] }, '/contract', 'type', '/contract must be object'],
    ['without contract_id', { contract: { contract_id: null } }, '/contract/contract_id', 'required', "/contract must have required property 'contract_id'"],
    ['with a contract_id that is no string', { contract: { contract_id: 7 } }, '/contract/contract_id', 'type', '/contract/contract_id must be string'],
    ['without version', { contract: { version: null } }, '/contract/version', 'required', "/contract must have required property 'version'"],
  ])('refuses a contract reference %s with SCHEMA_VIOLATION', async (_name, patch, pointer, keyword, message) => {
    const res = await submit(request(patch));
    const body = await res.json();
    expect(res.status, JSON.stringify(body)).toBe(400);
    valid('error', body.error);
    expect(body.error).toMatchObject({ code: 'SCHEMA_VIOLATION', category: 'VALIDATION', message, details: { pointer, keyword } });
  });

  it('refuses a body that is not an object', async () => {
    const res = await s.http('/v1/contracts:submit', { method: 'POST', body: '[1,2]', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect((await res.json()).error.category).toBe('VALIDATION');
  });
});

// A row's xmin names the transaction that wrote it, and its cmin the statement within it.
describe('what commits together', () => {
  const eventsOf = (ticket: string) =>
    s.orm.em.fork().execute<{ type: string; payload: Record<string, any>; xid: string }[]>("SELECT type, payload, xmin::text || ':' || cmin::text AS xid FROM ticket_events WHERE ticket = ? ORDER BY seq", [ticket]);
  const moves = (events: { type: string; payload: Record<string, any> }[]) => events.filter((e) => e.type === 'STATE_TRANSITION').map((e) => `${e.payload.from}->${e.payload.to}`);

  it('commits the context, the first plan, its approval and its preparation in one statement, with its steps, their contracts and its snapshot', async () => {
    const done = await runToEnd(request());
    const events = await eventsOf(done.ticket);
    const planned = events.find((e) => e.type === 'STATE_TRANSITION' && e.payload.from === 'CONTEXT_BUILD')!;
    const together = events.filter((e) => e.xid === planned.xid);
    expect(moves(together)).toEqual(['CONTEXT_BUILD->PLAN_GENERATION', 'PLAN_GENERATION->PLAN_CHECK', 'PLAN_CHECK->EXECUTION_PREPARE', 'EXECUTION_PREPARE->STEP_EXECUTION']);
    expect(together.map((e) => e.type)).toEqual(['AGENT_DECISION', 'STATE_TRANSITION', 'AGENT_DECISION', 'STATE_TRANSITION', 'AGENT_DECISION', 'STATE_TRANSITION', 'SNAPSHOT_CREATED', 'STATE_TRANSITION']);
    expect(together.filter((e) => e.type === 'AGENT_DECISION').map((e) => e.payload.role)).toEqual(['CONTEXT_BUILDER', 'PLANNER', 'PLAN_CRITIC']);
    const em = s.orm.em.fork();
    const [plan] = await em.execute<{ xid: string }[]>("SELECT xmin::text || ':' || cmin::text AS xid FROM frozen_plans WHERE ticket = ?", [done.ticket]);
    const snapshots = await em.execute<{ xid: string; lifecycle_state: string }[]>("SELECT xmin::text || ':' || cmin::text AS xid, lifecycle_state FROM snapshots WHERE ticket = ? ORDER BY created_at", [done.ticket]);
    const contracts = await em.execute<{ xid: string; n: number }[]>("SELECT min(t.xmin::text || ':' || t.cmin::text) AS xid, count(*)::int AS n FROM execution_transitions t JOIN execution_contracts c USING (execution_id) WHERE c.ticket = ? AND t.from_status = 'pending'", [done.ticket]);
    expect(plan!.xid).toBe(planned.xid);
    expect(snapshots[0]).toEqual({ xid: planned.xid, lifecycle_state: 'EXECUTION_PREPARE' });
    // Each contract opened pending with the plan, and left it later, with its step.
    expect(contracts[0]!.n).toBe(7);
    expect(contracts[0]!.xid).not.toBe(planned.xid);
  });

  it('creates a sync ticket that its submitting core runs already started and claimed, in the statement that commits its context and first plan', async () => {
    const res = await submit(request({ execution_preferences: { mode: 'sync' } }));
    expect(res.status).toBe(200);
    const ticket = res.headers.get('x-abc-ticket')!;
    const events = await eventsOf(ticket);
    expect(events[0]!.type).toBe('ticket_created');
    const first = events.filter((e) => e.xid === events[0]!.xid);
    expect(moves(first)).toEqual(['INIT->CONTEXT_BUILD', 'CONTEXT_BUILD->PLAN_GENERATION', 'PLAN_GENERATION->PLAN_CHECK', 'PLAN_CHECK->EXECUTION_PREPARE', 'EXECUTION_PREPARE->STEP_EXECUTION']);
    expect(first[1]!.payload).toMatchObject({ trigger: 'start', actor: 'worker' });
    expect(first.map((e) => e.type)).toEqual(['ticket_created', 'STATE_TRANSITION', 'AGENT_DECISION', 'STATE_TRANSITION', 'AGENT_DECISION', 'STATE_TRANSITION', 'AGENT_DECISION', 'STATE_TRANSITION', 'SNAPSHOT_CREATED', 'STATE_TRANSITION']);
    const [plan] = await s.orm.em.fork().execute<{ xid: string }[]>("SELECT xmin::text || ':' || cmin::text AS xid FROM frozen_plans WHERE ticket = ?", [ticket]);
    expect(plan!.xid).toBe(events[0]!.xid);
    expect(moves(events).at(-1)).toBe('PACKAGING->COMPLETED');
  });

  it('creates a sync ticket alone, before its context commits, when its first plan does not pass in one go (a step planned skipped)', async () => {
    const res = await submit(request({ execution_preferences: { mode: 'sync' }, context: { analysis_scope: { include_performance: false } } }));
    expect(res.status).toBe(200);
    const events = await eventsOf(res.headers.get('x-abc-ticket')!);
    expect(moves(events.filter((e) => e.xid === events[0]!.xid))).toEqual(['INIT->CONTEXT_BUILD']);
    expect(moves(events)[1]).toBe('CONTEXT_BUILD->PLAN_GENERATION');
    expect(moves(events).at(-1)).toBe('PACKAGING->COMPLETED');
  });

  it('answers sync replays sent at once with one ticket: a replay whose creation finds the key taken writes nothing and waits for the original', async () => {
    const body = request({ execution_preferences: { mode: 'sync' }, correlation: { session_id: `session-sync-replays-${Date.now()}` } });
    const replays = [0, 1, 2, 3].map((i) => ({ ...body, correlation: { ...body.correlation, request_id: `req-sync-replay-${i}` } }));
    const answers = await Promise.all(replays.map(submit));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const tickets = new Set(answers.map((r) => r.headers.get('x-abc-ticket')));
    expect(tickets.size).toBe(1);
    const docs = await Promise.all(answers.map((r) => r.json()));
    expect(docs.map((d) => d.correlation.request_id)).toEqual(replays.map((r) => r.correlation.request_id));
    const em = s.orm.em.fork();
    expect(await em.execute('SELECT count(*)::int AS n FROM tickets WHERE idempotency_key = ?', [body.correlation.idempotency_key])).toEqual([{ n: 1 }]);
    // Nothing of the replays' own plans was written: one plan, seven steps and their contracts.
    const [ticket] = [...tickets];
    expect(await em.execute('SELECT count(*)::int AS n FROM frozen_plans WHERE ticket = ?', [ticket])).toEqual([{ n: 1 }]);
    expect(await em.execute("SELECT count(*)::int AS n FROM execution_contracts WHERE session_id = ? AND ticket <> ?", [body.correlation.session_id, ticket])).toEqual([{ n: 0 }]);
  });

  const stepEvents = ['step_transition', 'POLICY_EVALUATION', 'AGENT_DECISION', 'TOOL_CALL_START', 'execution_state', 'step_transition', 'TOOL_CALL_END', 'execution_state'];

  describe('with batches that settle within ABC_STEP_START_DEFER_MS of each other', () => {
    // Its own core, where that time is a minute: what commits together does not depend on this machine's speed.
    let patient: TestStack;
    beforeAll(async () => {
      patient = await startTestStack({ contracts: { workers: 2, leaseMs: 1000, stepStartDeferMs: 60_000 } });
      await importSamplePortfolios(patient.orm);
    });
    afterAll(() => patient?.close());

    const finished = async () => {
      const res = await patient.http('/v1/contracts:submit', { method: 'POST', json: request({ execution_preferences: { mode: 'sync' } }) });
      expect(res.status).toBe(200);
      const ticket = res.headers.get('x-abc-ticket')!;
      const events = await patient.orm.em.fork().execute<{ type: string; payload: Record<string, any>; tx: string }[]>('SELECT type, payload, xmin::text AS tx FROM ticket_events WHERE ticket = ? ORDER BY seq', [ticket]);
      return { ticket, events };
    };

    it("commits every batch, each step's end with its batch's review, and the packaging in one statement, and leaves no step context behind", async () => {
      const { ticket, events } = await finished();
      const tx = events.at(-1)!.tx;
      const last = events.filter((e) => e.tx === tx);
      const batch = ['STEP_EXECUTION->STEP_REVIEW', 'STEP_REVIEW->STEP_EXECUTION'];
      expect(moves(last)).toEqual([...batch, ...batch, ...batch, ...batch, ...batch, 'STEP_EXECUTION->GLOBAL_REVIEW', 'GLOBAL_REVIEW->PACKAGING', 'PACKAGING->COMPLETED']);
      // In the order they happened: a batch's steps, then its review, then the next batch.
      expect(last.slice(0, 12).map((e) => e.type)).toEqual([...stepEvents, 'STATE_TRANSITION', 'SNAPSHOT_CREATED', 'AGENT_DECISION', 'STATE_TRANSITION']);
      expect(last[0]!.payload).toMatchObject({ step_id: 'load_portfolio', trigger: 'start' });
      expect(last[12]!.payload).toMatchObject({ step_id: 'value_positions', trigger: 'start' });
      expect(last.filter((e) => e.type === 'SNAPSHOT_CREATED')).toHaveLength(5);
      const steps = await patient.orm.em.fork().execute<{ tx: string }[]>('SELECT xmin::text AS tx FROM ticket_steps WHERE ticket = ?', [ticket]);
      expect(steps.map((r) => r.tx)).toEqual(Array(7).fill(tx));
      expect(await patient.orm.em.fork().execute("SELECT key FROM memory WHERE scope = 'EPHEMERAL' AND scope_id LIKE ?", [`${ticket}:%`])).toEqual([]);
      // Every move of the lifecycle is recorded, in order, from the submit to the end.
      expect(moves(events)[0]).toBe('INIT->CONTEXT_BUILD');
      for (const [i, e] of events.filter((x) => x.type === 'STATE_TRANSITION').entries()) if (i) expect(e.payload.from).toBe(moves(events)[i - 1]!.split('->')[1]);
      // The admission with the plan, and the rest: two commits.
      expect(new Set(events.map((e) => e.tx)).size).toBe(2);
    });
  });
});

describe('the observer sees every plan step as an execution contract', () => {
  it('serves the timeline, a snapshot and the consequences, and streams execution_state in order', async () => {
    const body = request({ correlation: { session_id: 'session-observed-1' }, context: { analysis_scope: { include_performance: false } } });
    const done = await runToEnd(body);
    expect(done.status).toBe('SUCCEEDED');

    const t = await (await s.http('/api/execution/session-observed-1/timeline')).json();
    expect(t).toMatchObject({ session_id: 'session-observed-1', total_contracts: 7, terminal_contracts: 7, active_contracts: 0, has_suspended: false, has_irreversible_completed: false });
    expect(t.contracts.map((c: { action_summary: string }) => c.action_summary)).toContain('portfolio.read → Load portfolio');
    const byStep = Object.fromEntries(t.contracts.map((c: { idempotency_key: string; current_status: string }) => [c.idempotency_key.split(':')[1], c.current_status]));
    expect(byStep).toMatchObject({ load_portfolio: 'completed', performance: 'cancelled', highlights: 'completed' });
    expect(t.ended_at).toBeGreaterThanOrEqual(t.started_at);
    for (let i = 1; i < t.transitions.length; i++) expect(t.transitions[i].timestamp).toBeGreaterThanOrEqual(t.transitions[i - 1].timestamp);

    const load = t.contracts.find((c: { action_summary: string }) => c.action_summary.startsWith('portfolio.read'));
    const snap = await (await s.http(`/api/execution/${load.execution_id}/snapshot`)).json();
    expect(snap).toMatchObject({ action_type: 'contract_step', current_status: 'completed', is_terminal: true, is_stable: true, transition_count: 2, last_actor: 'graph_runner', last_trigger: 'succeed' });
    expect(JSON.parse(snap.result)).toMatchObject({ source: 'portfolio_ref', portfolio_id: 'pf-demo-balanced' });

    const c = await (await s.http('/api/execution/session-observed-1/consequences')).json();
    expect(c.views.map((v: { consequence_label: string }) => v.consequence_label).sort()).toEqual(['CANCELLED', 'SUCCESS', 'SUCCESS', 'SUCCESS', 'SUCCESS', 'SUCCESS', 'SUCCESS']);
    expect(JSON.stringify(c.views)).not.toContain('idempotency_key');
    expect(c.prompt_text.split('\n')[0]).toMatch(/^\[SUCCESS\] portfolio\.read → Load portfolio: \{/);
    expect(c.prompt_text).toContain('[CANCELLED] analytics.performance → Compute performance: context.analysis_scope.include_performance is false');

    const events = await s.orm.em.fork().execute<{ seq: number; payload: Record<string, any> }[]>("SELECT seq, payload FROM ticket_events WHERE ticket = ? AND type = 'execution_state' ORDER BY seq", [done.ticket]);
    const load2 = events.filter((e) => e.payload.execution_id === load.execution_id).map((e) => `${e.payload.from_status}->${e.payload.to_status}`);
    expect(load2).toEqual(['pending->running', 'running->completed']);
    expect(events[0]!.payload).toEqual(expect.objectContaining({ actor_category: 'system', is_terminal: expect.any(Boolean), is_resumable: false, has_side_effects: false, timestamp: expect.any(Number) }));
  });

  it('writes nothing: every observer read leaves every table as it was', async () => {
    // Let every earlier execution of this file settle first.
    await expect.poll(async () => (await s.orm.em.fork().execute<{ n: number }[]>("SELECT count(*)::int AS n FROM tickets WHERE status IN ('QUEUED', 'RUNNING')"))[0]!.n, { timeout: 10_000 }).toBe(0);
    const tables = ['execution_contracts', 'execution_transitions', 'memory', 'events', 'ticket_events', 'tickets', 'ticket_steps', 'runs', 'tool_calls'];
    const before = await tableDigest(s.orm, tables);
    const [one] = await s.orm.em.fork().execute<{ execution_id: string }[]>("SELECT execution_id FROM execution_contracts WHERE session_id = 'session-observed-1' LIMIT 1");
    for (let i = 0; i < 5; i++) {
      for (const path of ['/api/execution/session-observed-1/timeline', `/api/execution/${one!.execution_id}/snapshot`, '/api/execution/session-observed-1/consequences', '/v1/metrics/runs', '/v1/metrics/tools', '/api/execution/topology']) {
        expect((await s.http(path)).status).toBe(200);
      }
    }
    expect(await tableDigest(s.orm, tables)).toBe(before);
  });

  it('refuses an unknown execution', async () => {
    const res = await s.http('/api/execution/exe_nope/snapshot');
    expect(res.status).toBe(404);
  });
});
