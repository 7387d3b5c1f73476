// Cognitive roles filled from outside: an LLM reviewer through ABC's own LLM
// proxy path, and a plan critic that is a registered agent over POST /invoke.
// The built-in checks still run first; the outside answer can only add doubt.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { completion, startFakeLlm, type FakeLlm } from '../support/fake-llm.js';
import { sse, startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { importSamplePortfolios, pollUntilDone, referenceAssembly, request } from '../support/contracts.js';

let s: TestStack;
let llm: FakeLlm;
let critic: FakeAgent;

beforeAll(async () => {
  llm = await startFakeLlm();
  critic = await startFakeAgent();
  s = await startTestStack({ llm: { routerUrl: llm.url, model: 'summary-model' }, contracts: { workers: 1 } });
  await importSamplePortfolios(s.orm);
  expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'critic', name: 'critic', endpoint: critic.url } })).status).toBe(200);
});
afterAll(async () => {
  await s?.close();
  await llm?.close();
  await critic?.close();
});

type Json = Record<string, any>;

async function register(version: string, engine: Json): Promise<void> {
  const a = referenceAssembly();
  a.version = version;
  a.engine = engine;
  const res = await s.http('/v1/assemblies', { method: 'POST', json: a });
  expect(res.status, await res.clone().text()).toBe(201);
}

const submit = async (): Promise<string> => (await (await s.http('/v1/contracts:submit', { method: 'POST', json: request() })).json()).task.ticket;
const trace = async (ticket: string, types: string): Promise<Json[]> => (await (await s.http(`/v1/tickets/${ticket}/trace?types=${types}`)).json()).events;

describe('an LLM-backed REVIEWER', () => {
  it('is asked through the proxy path; low confidence on the result waits for a human, who accepts it', async () => {
    llm.behave((req, res) => {
      const judging = req.json.model === 'judge-model';
      const global = judging && !String(req.json.messages[1].content).includes('"step_context"');
      const content = judging ? JSON.stringify({ success: true, confidence: global ? 0.3 : 0.9 }) : JSON.stringify(['Balanced.']);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion(req.json.model, content)));
    });
    await register('1.60.0', { roles: { REVIEWER: { kind: 'llm', model: 'judge-model', instructions: 'Be strict.' } } });
    const ticket = await submit();
    await expect.poll(async () => (await s.http(`/v1/tickets/${ticket}`)).headers.get('x-abc-lifecycle-state'), { timeout: 10_000 }).toBe('WAIT_HUMAN');
    const ctx = await (await s.http(`/v1/tickets/${ticket}/context`)).json();
    expect(ctx.human_request).toMatchObject({ kind: 'result', reason: 'confidence 0.3 is below 0.6' });

    const asked = llm.requests.filter((r) => r.json.model === 'judge-model');
    expect(asked.length).toBeGreaterThan(1);
    expect(asked[0]!.json).toMatchObject({ response_format: { type: 'json_object' }, temperature: 0 });
    expect(asked[0]!.json.messages[0].content).toMatch(/You are the REVIEWER.*Be strict\./);
    const state = JSON.parse(asked[0]!.json.messages[1].content);
    expect(state).toMatchObject({ global_state: { execution_id: ticket }, step_context: { step_id: expect.any(String) } });

    const decisions = (await trace(ticket, 'AGENT_DECISION')).filter((e) => e.payload.role === 'REVIEWER');
    expect(decisions[0]!.payload).toMatchObject({ agents: ['builtin.reviewer', 'llm.judge-model'], confidence: 0.9 });
    // The proxy recorded each call: tokens, latency, the model that served it.
    expect(decisions[0]!.payload.llm_calls[0]).toMatchObject({ model: 'judge-model', served_by: 'judge-model', prompt_tokens: 11, completion_tokens: 2, attempts: 1, error: null });

    await s.http(`/v1/tickets/${ticket}:feedback`, { method: 'POST', json: { action: 'continue', feedback: 'the numbers check out' } });
    const done = await pollUntilDone(s.http, ticket);
    expect(done.status).toBe('SUCCEEDED');
    expect(done.result.overview.highlights).toEqual(['Balanced.']);
  });

  it('cannot overrule the built-in checks, and a broken answer fails the review', async () => {
    llm.behave((req, res) => {
      const content = req.json.model === 'judge-model' ? 'I think it is fine' : JSON.stringify(['Balanced.']);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion(req.json.model, content)));
    });
    await register('1.61.0', { roles: { REVIEWER: { kind: 'llm', model: 'judge-model' } }, max_consecutive_failures: 2 });
    const done = await pollUntilDone(s.http, await submit());
    expect(done.status).toBe('FAILED');
    expect(done.error).toMatchObject({ code: 'ROLE_AGENT_FAILED', details: { role: 'REVIEWER' } });
    expect(done.error.message).toMatch(/did not answer JSON/);
  });
});

describe('a PLAN_CRITIC that is a registered agent', () => {
  const answer = (output: Json) => (inv: Json, res: Parameters<Parameters<FakeAgent['behave']>[0]>[1]) => {
    sse(res, 'done', { usage: {}, final_message: JSON.stringify(output), run_id: inv.body.run_id });
    res.end();
  };

  it('reads the frozen plan and can refuse it', async () => {
    llm.behave((req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion(req.json.model, JSON.stringify(['Balanced.'])))));
    critic.behave(answer({ success: false, confidence: 0.9, errors: [{ code: 'GOAL_MISMATCH', message: 'the plan ignores the restricted assets', suggested_action: 'HALT' }] }));
    await register('1.62.0', { roles: { PLAN_CRITIC: { kind: 'agent', agent_id: 'critic' } } });
    const done = await pollUntilDone(s.http, await submit());
    expect(done.status).toBe('FAILED');
    expect(done.error).toMatchObject({ code: 'GOAL_MISMATCH', message: 'the plan ignores the restricted assets' });
    const invocation = critic.invocations.at(-1)!;
    expect(invocation.headers['x-abc-role']).toBe('PLAN_CRITIC');
    const seen = JSON.parse(invocation.body.input_message.content);
    expect(seen.execution_context.current_plan.steps.map((x: Json) => x.id)).toContain('load_portfolio');
    expect(seen.execution_context.proposal).toEqual({ checked_steps: 7 });
  });

  it('approves, and the execution completes', async () => {
    critic.behave(answer({ success: true, confidence: 0.8 }));
    await register('1.63.0', { roles: { PLAN_CRITIC: { kind: 'agent', agent_id: 'critic' } } });
    const done = await pollUntilDone(s.http, await submit());
    expect(done.status).toBe('SUCCEEDED');
    const critique = (await trace(done.ticket, 'AGENT_DECISION')).find((e) => e.payload.role === 'PLAN_CRITIC')!;
    expect(critique.payload).toMatchObject({ agents: ['builtin.plan_critic', 'agent.critic'], success: true, confidence: 0.8 });
  });

  it('refuses an engine section that breaks its schema, at its pointer', async () => {
    const a = referenceAssembly();
    a.version = '1.64.0';
    a.engine = { roles: { PLAN_CRITIC: { kind: 'agent' } } };
    const res = await s.http('/v1/assemblies', { method: 'POST', json: a });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: 'INVALID_ASSEMBLY', details: { pointer: expect.stringMatching(/^\/assembly\/engine\/roles\/PLAN_CRITIC/) } });
  });
});
