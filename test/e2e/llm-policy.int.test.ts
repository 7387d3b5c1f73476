// LLM calls and agent-to-agent calls ask the same policy as tool calls: models
// outside a tenant's allow-list are refused, token budgets per run and per
// tenant run out with a clear error recorded on the run, and a forbidden
// callee is refused. A contract's LLM steps are the ticket's tenant's calls,
// under its policy and budgets. Driven by the official openai SDK against a
// fake router.
import { randomUUID } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeys } from '../../src/access/api-keys.js';
import { readEvents } from '../../src/store/event-log.js';
import { startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.js';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { liveRun } from '../support/live-run.js';

let s: TestStack;
let upstream: FakeLlm;
let agent: FakeAgent;
let acmeKey: string;
const messages = [{ role: 'user' as const, content: 'Hello' }];

const POLICY = {
  version: 3,
  default: 'allow',
  budgets: { run_tokens: 30, tenants: { acme: { tenant_tokens_per_day: 20 } } },
  rules: [
    { id: 'mini-only', tools: ['gpt-4o-mini'], when: { actions: ['llm_call'] }, decision: 'allow' },
    { id: 'no-other-models', tools: ['*'], when: { actions: ['llm_call'] }, decision: 'block', reason: 'only gpt-4o-mini' },
    { id: 'no-auditor', tools: ['auditor'], when: { actions: ['agent_call'] }, decision: 'block', reason: 'agents may not call the auditor' },
  ],
};

beforeAll(async () => {
  const policyFile = path.join(await mkdtemp(path.join(os.tmpdir(), 'abc-llm-policy-')), 'policy.json');
  await writeFile(policyFile, JSON.stringify(POLICY));
  upstream = await startFakeLlm();
  s = await startTestStack({ policyFile, agentIdleTimeoutMs: 30_000, llm: { routerUrl: upstream.url, timeoutMs: 2000 }, contracts: { workers: 1 } });
  const keys = new ApiKeys(s.orm);
  await keys.createTenant('acme');
  acmeKey = (await keys.create('acme', { tenantId: 'acme' })).key;
  agent = await startFakeAgent();
  for (const id of ['caller', 'auditor']) {
    expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: id, name: id, endpoint: agent.url } })).status).toBe(200);
  }
});
afterAll(async () => {
  await agent?.close();
  await s?.close();
  await upstream?.close();
});

const client = (apiKey: string) => new OpenAI({ baseURL: `${s.url}/v1`, apiKey, maxRetries: 0 });
const refusal = async (promise: Promise<unknown>) => {
  try {
    await promise;
  } catch (error) {
    return error as APIError;
  }
  throw new Error('expected a refusal');
};
const tokensOfRun = async (runId: string) => (await s.orm.em.fork().execute<{ n: number }[]>('SELECT tokens_used AS n FROM runs WHERE run_id = ?', [runId]))[0]!.n;
const tokensOfTenant = async (tenant: string) => Number((await s.orm.em.fork().execute<{ n: string }[]>('SELECT coalesce(sum(tokens), 0) AS n FROM token_usage WHERE tenant_id = ?', [tenant]))[0]!.n);

describe('models', () => {
  it('refuses a model outside the allow-list and serves one on it', async () => {
    const refused = await refusal(client(s.key).chat.completions.create({ model: 'gpt-4', messages }));
    expect(refused.status).toBe(403);
    // The OpenAI error shape, which the SDK reads.
    expect(refused.error).toMatchObject({ code: 'blocked', type: 'permission_error' });
    expect(refused.message).toContain('does not allow model gpt-4: only gpt-4o-mini');
    expect(upstream.requests.filter((r) => r.json.model === 'gpt-4')).toHaveLength(0);
    expect((await client(s.key).chat.completions.create({ model: 'gpt-4o-mini', messages })).choices[0]!.message.content).toBe('Hello world');
  });
});

describe('token budgets', () => {
  it("stop a run's calls once its budget is used up, and say so on the run", async () => {
    const run = await liveRun(s, agent, { agentId: 'caller' });
    const asAgent = client(run.token);
    // Each call uses 13 tokens; the run may spend 30: the fourth call finds 39 spent.
    for (let i = 1; i <= 3; i++) {
      await asAgent.chat.completions.create({ model: 'gpt-4o-mini', messages });
      await expect.poll(() => tokensOfRun(run.runId)).toBe(13 * i);
    }
    const refused = await refusal(asAgent.chat.completions.create({ model: 'gpt-4o-mini', messages }));
    expect(refused.status).toBe(429);
    expect(refused.error).toMatchObject({ code: 'budget_exhausted', type: 'insufficient_quota' });
    expect(refused.message).toContain("run's token budget is used up (39 of 30 tokens)");
    const recorded = await readEvents(s.orm.em.fork(), { runId: run.runId, types: ['policy_decision'] }, '0', 10);
    expect(recorded.at(-1)!.payload).toMatchObject({ action: 'llm_call', decision: 'block', code: 'budget_exhausted', budget: 'run_tokens', limit: 30, used: 39 });
    run.release();
    run.ws.close();
  });

  it("stop a tenant's calls once its daily budget is used up, and no other tenant's", async () => {
    for (let i = 1; i <= 2; i++) {
      await client(acmeKey).chat.completions.create({ model: 'gpt-4o-mini', messages });
      await expect.poll(() => tokensOfTenant('acme')).toBe(13 * i);
    }
    const refused = await refusal(client(acmeKey).chat.completions.create({ model: 'gpt-4o-mini', messages }));
    expect(refused.status).toBe(429);
    expect(refused.message).toContain("tenant's daily token budget is used up (26 of 20 tokens)");
    expect((await client(s.key).chat.completions.create({ model: 'gpt-4o-mini', messages })).choices).toHaveLength(1);
  });
});

describe("a contract's LLM steps", () => {
  it("are its tenant's calls: counted against its budget, and refused by its policy", async () => {
    const keys = new ApiKeys(s.orm);
    await keys.createTenant('globex');
    const globex = (await keys.create('globex', { tenantId: 'globex' })).key;
    const post = (path: string, json: unknown, method = 'POST') => s.http(path, { method, key: globex, json });
    const schema = (kind: string) => ({ $id: `urn:globex:ask:${kind}`, type: 'object' });
    expect((await post('/v1/contracts', { contract_id: 'globex:ask', version: '1.0.0', intent: 'ask_model', schemas: { request: schema('request'), result: schema('result') } })).status).toBe(201);
    const steps = [{ id: 'ask', label: 'Ask', tool_name: 'llm.complete', input: { prompt: '$.input.question' }, dependencies: [] }];
    const assembly = { assembly_id: 'ask', version: '1.0.0', intent: 'ask_model', expected_latency_ms: 1000, capabilities: [{ name: 'llm.complete', kind: 'LLM' }], steps, output: { result: { '/answer': '/ask/text' } } };
    expect((await post('/v1/assemblies', assembly)).status).toBe(201);
    const ask = async (question: string) => {
      const n = randomUUID();
      const correlation = { request_id: `req-${n}`, idempotency_key: `idem-${n}`, session_id: `sess-${n}`, sent_at: new Date().toISOString() };
      const res = await post('/v1/contracts:submit', { contract: { contract_id: 'globex:ask', version: '1.0.0' }, intent: 'ask_model', correlation, input: { question }, execution_preferences: { mode: 'sync', max_latency_ms: 20_000 } });
      return { status: res.status, body: await res.json() };
    };

    expect((await ask('first question')).body.result).toEqual({ answer: 'Hello world' });
    await expect.poll(() => tokensOfTenant('globex')).toBe(13);

    expect((await post('/v1/policy', { version: 1, default: 'allow', rules: [{ id: 'no-models', tools: ['*'], when: { actions: ['llm_call'] }, decision: 'block', reason: 'globex uses no models' }] }, 'PUT')).status).toBe(200);
    const refused = await ask('second question');
    expect(refused.body.error).toMatchObject({ code: 'blocked', category: 'COMPLIANCE' });
    expect(refused.body.error.message).toContain('globex uses no models');
    expect(upstream.requests.some((r) => JSON.stringify(r.json).includes('second question'))).toBe(false);
  });
});

describe('agent-to-agent calls', () => {
  it('refuses a callee the policy forbids, and records it on the calling run', async () => {
    const run = await liveRun(s, agent, { agentId: 'caller' });
    const res = await s.http('/v1/agents/auditor:invoke', { method: 'POST', key: run.token, json: { parent_run_id: run.runId, input_message: { role: 'user', content: 'check' } } });
    expect(res.status).toBe(403);
    expect((await res.json()).error).toMatchObject({ code: 'blocked', details: { agent_id: 'auditor', rule_id: 'no-auditor', policy_version: 3 } });
    const recorded = await readEvents(s.orm.em.fork(), { runId: run.runId, types: ['policy_decision'] }, '0', 10);
    expect(recorded.at(-1)!.payload).toMatchObject({ action: 'agent_call', decision: 'block', agent_id: 'auditor' });
    expect(agent.invocations.filter((i) => i.body.agent_id === 'auditor')).toHaveLength(0);
    run.release();
    run.ws.close();
  });
});
