// Seed 000 conformance of analyze_portfolio found in the audit: the caller's holdings
// are its record, odd portfolios are refused or warned about (never a 500), progress
// is work done, and every answer can be traced.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importSamplePortfolios, pollUntilDone, request } from '../support/contracts.js';
import { startTestStack, type TestStack } from '../support/gateway.js';

let s: TestStack;
beforeAll(async () => {
  s = await startTestStack({ contracts: { workers: 1 } });
  await importSamplePortfolios(s.orm);
});
afterAll(async () => {
  await s.close();
});

const submit = (body: unknown, headers: Record<string, string> = {}) => s.http('/v1/contracts:submit', { method: 'POST', json: body, headers });
const sync = (positions: unknown[], context: Record<string, unknown> = {}) =>
  request({ input: { portfolio_ref: null, positions }, context, execution_preferences: { mode: 'sync', max_latency_ms: 20_000 } });

describe('valuation', () => {
  it('uses a reported market value and warns when ABC prices it more than 1% apart', async () => {
    const res = await submit(sync([{ asset_id: 'AAPL', asset_type: 'equity', quantity: 120, market_value: 27_000 }]));
    const body = await res.json();
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.result.overview.portfolio_value).toBe(27_000);
    expect(body.warnings.join('\n')).toMatch(/AAPL: the reported market value 27000 USD was used; at the 2026-11-20 close ABC prices it at 17303\.86 USD/);
  });

  it('does not warn when the reported value agrees within 1%', async () => {
    const body = await (await submit(sync([{ asset_id: 'AAPL', asset_type: 'equity', quantity: 120, market_value: 17_350 }]))).json();
    expect(body.warnings.join('\n')).not.toContain('reported market value');
  });

  it('refuses a report currency without FX data as DATA_SOURCE, naming it', async () => {
    const res = await submit(sync([{ asset_id: 'AAPL', asset_type: 'equity', quantity: 1 }], { currency: 'JPY' }));
    const body = await res.json();
    expect(res.status).toBeLessThan(500);
    expect(body.error).toMatchObject({ code: 'UNSUPPORTED_CURRENCY', category: 'DATA_SOURCE', retryable: false });
    expect(body.error.message).toContain('JPY');
    // With performance asked for as well: the same answer, never a 500.
    const perf = await submit(sync([{ asset_id: 'AAPL', asset_type: 'equity', quantity: 1 }], { currency: 'JPY', analysis_scope: { include_performance: true } }));
    expect(perf.status).toBeLessThan(500);
    expect((await perf.json()).error.code).toBe('UNSUPPORTED_CURRENCY');
  });

  it('refuses a short position with VALIDATION, never a 500', async () => {
    const res = await submit(sync([{ asset_id: 'AAPL', asset_type: 'equity', quantity: -10 }]));
    const body = await res.json();
    expect(res.status).toBe(400);
    expect(body.error).toMatchObject({ code: 'SHORT_POSITION_UNSUPPORTED', category: 'VALIDATION', retryable: false });
  });

  it('warns when the request disagrees with the market data: currency, asset type, a date past the data', async () => {
    const body = await (
      await submit(sync([{ asset_id: 'AAPL', asset_type: 'bond', quantity: 10, currency: 'EUR' }], { as_of: '2026-12-31' }))
    ).json();
    const warnings = body.warnings.join('\n');
    expect(warnings).toContain('AAPL trades in USD, but the request says EUR');
    expect(warnings).toContain('AAPL is equity in the market data, but the request says bond');
    expect(warnings).toContain('market data ends on 2026-11-20');
  });
});

describe('the ticket', () => {
  it('reports the progress made, not 85%, when the first step fails', async () => {
    const res = await submit(request({ input: { portfolio_ref: { portfolio_id: 'pf-nope' } }, execution_preferences: { progress_granularity: 'step' } }));
    const done = await pollUntilDone(s.http, (await res.json()).task.ticket);
    expect(done.status).toBe('FAILED');
    expect(done.progress.percent).toBeLessThanOrEqual(15);
  });

  it('joins the caller trace: traceparent, or a client_trace_id that is a W3C trace id', async () => {
    const viaHeader = 'a'.repeat(32);
    const a = await submit(request(), { traceparent: `00-${viaHeader}-${'b'.repeat(16)}-01` });
    expect((await (await s.http(`/v1/tickets/${a.headers.get('x-abc-ticket')}/trace`)).json()).trace_id).toBe(viaHeader);
    const viaBody = 'c'.repeat(32);
    const b = await submit(request({ correlation: { client_trace_id: viaBody } }));
    expect((await (await s.http(`/v1/tickets/${b.headers.get('x-abc-ticket')}/trace`)).json()).trace_id).toBe(viaBody);
    const c = await submit(request({ correlation: { client_trace_id: 'crm-7781' } }));
    const trace = await (await s.http(`/v1/tickets/${c.headers.get('x-abc-ticket')}/trace`)).json();
    expect(trace.events.find((e: { type: string }) => e.type === 'ticket_created').payload).toMatchObject({ client_trace_id: 'crm-7781' });
  });

  it('names a trace on every error: auth, gateway validation, an unknown ticket', async () => {
    const errors = [
      await s.http('/v1/tickets/tkt_nope', { key: 'abc_not_a_key_0123456789' }),
      await s.http('/v1/tickets/tkt_nope', { key: null }),
      await s.http('/v1/tickets/tkt_nope?wait_ms=-1'),
      await s.http('/v1/tickets/tkt_nope'),
    ];
    for (const res of errors) {
      const body = await res.json();
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(body.error.trace_id, JSON.stringify(body)).toMatch(/^[0-9a-f]{32}$/);
    }
  });
});

describe('cancel', () => {
  // Cancels racing each other and the worker: exactly one wins, the rest learn the ticket finished, none gets a 500.
  it('answers concurrent cancels of a running ticket with one 200 and 409s, never a deadlock 500', async () => {
    for (let i = 0; i < 12; i++) {
      const submitted = await submit(request());
      expect(submitted.status).toBe(202);
      const ticket = submitted.headers.get('x-abc-ticket');
      // Let the worker get into the ticket by a varying amount.
      await new Promise((r) => setTimeout(r, i * 7));
      const answers = await Promise.all([1, 2, 3].map(() => s.http(`/v1/tickets/${ticket}:cancel`, { method: 'POST', json: {} })));
      const statuses = answers.map((a) => a.status).sort();
      expect(statuses.every((x) => x === 200 || x === 409), `ticket ${i}: ${statuses}`).toBe(true);
      expect(statuses.filter((x) => x === 200).length).toBeLessThanOrEqual(1);
    }
  }, 60_000);
});
