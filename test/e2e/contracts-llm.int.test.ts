// An LLM step runs only when the capability whitelist lists it and LLM_ROUTER_URL
// is set; when the LLM fails, the plan's deterministic fallback takes over.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { completion, startFakeLlm, type FakeLlm } from '../support/fake-llm.js';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { importSamplePortfolios, request } from '../support/contracts.js';

let s: TestStack;
let llm: FakeLlm;

beforeAll(async () => {
  llm = await startFakeLlm();
  s = await startTestStack({ llm: { routerUrl: llm.url, model: 'test-model' }, contracts: { workers: 1 } });
  await importSamplePortfolios(s.orm);
});
afterAll(async () => {
  await s?.close();
  await llm?.close();
});

const syncRequest = () => request({ execution_preferences: { mode: 'sync', max_latency_ms: 20_000 } });

describe('the highlights step', () => {
  it('uses the LLM when it is whitelisted and configured', async () => {
    llm.behave((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion(req.json.model, JSON.stringify(['Solid diversification.', 'Tech is heavy.']))));
    });
    const res = await s.http('/v1/contracts:submit', { method: 'POST', json: syncRequest() });
    const body = await res.json();
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.result.overview.highlights).toEqual(['Solid diversification.', 'Tech is heavy.']);
    const call = llm.requests.at(-1)!;
    expect(call.json.model).toBe('test-model');
    // The model sees computed facts only, and is told not to add numbers.
    expect(call.json.messages[1].content).toContain('Portfolio value');
    expect(call.json.messages[0].content).toContain('never add numbers');
    // The assembly's constraint on the capability reaches the model.
    expect(call.json.max_tokens).toBe(400);
    const [plan] = await s.orm.em.fork().execute<{ plan: { whitelist: { name: string }[]; steps: { id: string; tool_name: string }[] } }[]>(
      'SELECT plan FROM frozen_plans WHERE ticket = ?',
      [res.headers.get('x-abc-ticket')],
    );
    expect(plan!.plan.whitelist.map((c) => c.name)).toContain('llm.summarize');
    expect(plan!.plan.steps.find((x) => x.id === 'highlights')!.tool_name).toBe('llm.summarize');
  });

  it('falls back to the deterministic highlights when the LLM fails, and says so', async () => {
    llm.behave((_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"down","type":"server_error","code":null}}');
    });
    const res = await s.http('/v1/contracts:submit', { method: 'POST', json: syncRequest() });
    const body = await res.json();
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.result.overview.highlights[0]).toMatch(/^Portfolio value [\d,.]+ USD across \d+ valued positions/);
    expect(body.warnings.join(' ')).toMatch(/^highlights: llm\.summarize failed .*; report\.highlights was used/);
  });

  it('answers garbage from the LLM with the fallback too', async () => {
    llm.behave((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion(req.json.model, 'Sure! Here are some thoughts.')));
    });
    const body = await (await s.http('/v1/contracts:submit', { method: 'POST', json: syncRequest() })).json();
    expect(body.warnings.join(' ')).toContain('not answer with a JSON array');
  });
});
