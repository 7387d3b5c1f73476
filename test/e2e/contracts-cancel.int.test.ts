// Cancels racing each other and the worker: exactly one wins, the rest learn the ticket finished, none gets a 500.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { importSamplePortfolios } from '../support/contracts.js';
import { startTestStack, type TestStack } from '../support/gateway.js';

let s: TestStack;
beforeAll(async () => {
  s = await startTestStack({ contracts: { workers: 1 } });
  await importSamplePortfolios(s.orm);
});
afterAll(async () => {
  await s.close();
});

it('answers concurrent cancels of a running ticket with one 200 and 409s, never a deadlock 500', async () => {
  const body = { ...JSON.parse(readFileSync('examples/contracts/analyze-portfolio.json', 'utf8')), execution_preferences: { mode: 'async' } };
  for (let i = 0; i < 12; i++) {
    body.correlation = { ...body.correlation, idempotency_key: `cancel-race-${i}-key`, request_id: `cancel-race-${i}-req` };
    const submitted = await s.http('/v1/contracts:submit', { method: 'POST', json: body });
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
