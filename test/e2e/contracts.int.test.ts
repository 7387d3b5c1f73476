// The business contract API end to end: gateway → gRPC → core → queue worker.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { contract, importSamplePortfolios, pollUntilDone, registry, request } from '../support/contracts.js';

let s: TestStack;

beforeAll(async () => {
  s = await startTestStack({ contracts: { workers: 2, leaseMs: 1000 } });
  await importSamplePortfolios(s.orm);
});
afterAll(async () => s?.close());

describe('submit and poll', () => {
  it('accepts an async request with a ticket, and the poll reaches SUCCEEDED with a valid result', async () => {
    const res = await s.http('/v1/contracts:submit', { method: 'POST', json: request() });
    expect(res.status).toBe(202);
    const body = await res.json();
    expect(registry.validateResponse(contract, 'submit-response', body)).toEqual({ ok: true });
    expect(body.kind).toBe('task');
    const done = await pollUntilDone(s.http, body.task.ticket);
    expect(registry.validateResponse(contract, 'poll-response', done)).toEqual({ ok: true });
    expect(done.status, JSON.stringify(done)).toBe('SUCCEEDED');
    expect(done.progress).toMatchObject({ phase: 'done', percent: 100 });
    expect(done.result.overview.currency).toBe('USD');
  });

  it('answers sync with the result', async () => {
    const res = await s.http('/v1/contracts:submit', { method: 'POST', json: request({ execution_preferences: { mode: 'sync', max_latency_ms: 10000 } }) });
    const body = await res.json();
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.kind).toBe('result');
    expect(registry.validateResponse(contract, 'submit-response', body)).toEqual({ ok: true });
  });
});
