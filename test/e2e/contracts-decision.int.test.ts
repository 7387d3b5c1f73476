// The decision plane over gRPC (assemblies, frozen plans, replans) and the PEP
// refusing a step outside the capability whitelist.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorMessage } from '../support/error-message.js';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { failure, unary, withKey } from '../support/grpc.js';
import { insertAssembly, type AssemblyKey } from '../../src/store/assembly-store.js';
import { assemblyMessage, importSamplePortfolios, pollUntilDone, referenceAssembly, request } from '../support/contracts.js';

let s: TestStack;
let decision: TestStack['clients']['decision'];

beforeAll(async () => {
  s = await startTestStack({ contracts: { workers: 2, leaseMs: 1000 } });
  decision = s.clients.decision;
  await importSamplePortfolios(s.orm);
});
afterAll(async () => s?.close());

const planRequest = () => {
  const r = request();
  return { intent: r.intent, contract: { contractId: r.contract.contract_id, version: r.contract.version }, context: r.context, input: r.input, outputSpec: r.output_spec, executionId: '', assemblyVersion: '' };
};
const register = (a: Record<string, any>) => unary(decision.registerAssembly.bind(decision), { assembly: assemblyMessage(a), platform: false }, withKey(s.key));

describe('assemblies', () => {
  it('lists the reference assembly over gRPC and HTTP', async () => {
    const res = await unary(decision.listAssemblies.bind(decision), { intent: 'analyze_portfolio' }, withKey(s.key));
    expect(res.assemblies.map((a) => `${a.assemblyId}@${a.version}`)).toEqual(['analyze_portfolio@1.0.0']);
    const http = await (await s.http('/v1/assemblies?intent=analyze_portfolio')).json();
    expect(http.assemblies[0]).toMatchObject({ assembly_id: 'analyze_portfolio', version: '1.0.0', expected_latency_ms: 400 });
    expect(http.assemblies[0].steps.find((x: { id: string }) => x.id === 'highlights')).toMatchObject({ tool_name: 'llm.summarize', fallback_tool: 'report.highlights' });
  });

  it('treats versions as immutable: the same content is a no-op, different content is refused', async () => {
    await register(referenceAssembly());
    const changed = { ...referenceAssembly(), description: 'sneaky edit' };
    const error = await failure(register(changed));
    expect(error.code).toBe(status.ALREADY_EXISTS);
    expect(ErrorMessage(error)).toMatchObject({ code: 'ASSEMBLY_VERSION_EXISTS', retryable: false });
    await expect(s.orm.em.fork().execute("UPDATE assemblies SET expected_latency_ms = 1")).rejects.toThrow(/immutable/);
  });

  it('refuses a malformed assembly, naming the problem', async () => {
    const a = referenceAssembly();
    a.version = '2.0.0';
    a.steps[0].dependencies = ['highlights'];
    const error = await failure(register(a));
    expect(error.code).toBe(status.INVALID_ARGUMENT);
    expect(ErrorMessage(error)).toMatchObject({ code: 'INVALID_ASSEMBLY', details: { pointer: '/assembly/steps' } });
    expect(error.details).toMatch(/cycle/);
  });
});

describe('the decision plane over HTTP', () => {
  const reader = {
    assembly_id: 'portfolio_reader', version: '1.0.0', intent: 'read_portfolio', description: 'Loads and values a portfolio.',
    capabilities: [{ name: 'portfolio.read', kind: 'DATA_SOURCE' }, { name: 'market.read', kind: 'DATA_SOURCE' }],
    steps: [
      { id: 'load', label: 'Load', tool_name: 'portfolio.read', input: { input: '$.input' }, dependencies: [] },
      { id: 'value', label: 'Value', tool_name: 'market.read', input: { as_of: '$.context.as_of', currency: '$.context.currency' }, dependencies: ['load'], timeout_ms: 5000 },
    ],
  };

  it('registers an assembly, lists it, and refuses a changed version', async () => {
    const res = await s.http('/v1/assemblies', { method: 'POST', json: reader });
    expect(res.status).toBe(201);
    expect((await res.json()).assembly).toMatchObject({ assembly_id: 'portfolio_reader', steps: [{ id: 'load' }, { id: 'value', timeout_ms: 5000 }] });
    const listed = await (await s.http('/v1/assemblies?intent=read_portfolio')).json();
    expect(listed.assemblies.map((a: { version: string }) => a.version)).toEqual(['1.0.0']);
    const changed = await s.http('/v1/assemblies', { method: 'POST', json: { ...reader, description: 'changed' } });
    expect(changed.status).toBe(409);
    expect((await changed.json()).error.code).toBe('ASSEMBLY_VERSION_EXISTS');
    const bad = await s.http('/v1/assemblies', { method: 'POST', json: { ...reader, steps: [] } });
    expect(bad.status).toBe(400);
  });

  it('compiles the same input into the same plan_hash', async () => {
    const body = { intent: 'read_portfolio', context: { as_of: '2026-11-20', currency: 'USD' }, input: { portfolio_ref: { portfolio_id: 'pf-1' } } };
    const a = (await (await s.http('/v1/plans', { method: 'POST', json: body })).json()).plan;
    const b = (await (await s.http('/v1/plans', { method: 'POST', json: body })).json()).plan;
    expect(a).toMatchObject({ assembly_id: 'portfolio_reader', assembly_version: '1.0.0', whitelist: [{ name: 'market.read' }, { name: 'portfolio.read' }] });
    expect(a.steps[1].input).toEqual({ as_of: '2026-11-20', currency: 'USD' });
    expect(b.plan_hash).toBe(a.plan_hash);
    expect(b.plan_id).not.toBe(a.plan_id);
  });
});

describe('frozen plans', () => {
  it('compiles the same input into the same plan_hash, stored immutably', async () => {
    const a = (await unary(decision.plan.bind(decision), planRequest() as never, withKey(s.key))).plan!;
    const b = (await unary(decision.plan.bind(decision), planRequest() as never, withKey(s.key))).plan!;
    expect(b.planId).not.toBe(a.planId);
    expect(b.planHash).toBe(a.planHash);
    expect(a).toMatchObject({ assemblyId: 'analyze_portfolio', assemblyVersion: '1.0.0' });
    expect(a.steps.map((x) => x.id)).toEqual(['load_portfolio', 'value_positions', 'allocation', 'risk', 'performance', 'recommendations', 'highlights']);
    expect(a.whitelist.map((c) => c.name)).not.toContain('llm.summarize');
    await expect(s.orm.em.fork().execute('UPDATE frozen_plans SET plan_hash = ? WHERE plan_id = ?', ['0', a.planId])).rejects.toThrow(/immutable/);
    await expect(s.orm.em.fork().execute('DELETE FROM frozen_plans WHERE plan_id = ?', [a.planId])).rejects.toThrow(/immutable/);
  });

  it('replans LOCAL within the same version and GLOBAL with the latest one', async () => {
    const first = (await unary(decision.plan.bind(decision), planRequest() as never, withKey(s.key))).plan!;
    const local = (await unary(decision.replan.bind(decision), { planId: first.planId, scope: 'REPLAN_SCOPE_LOCAL', failedStepId: 'risk', error: undefined } as never, withKey(s.key))).plan!;
    expect(local).toMatchObject({ replacesPlanId: first.planId, planHash: first.planHash, assemblyVersion: '1.0.0' });
    expect(local.metadata).toMatchObject({ replan: { scope: 'LOCAL', failed_step_id: 'risk' } });

    const next = referenceAssembly();
    next.version = '1.0.1';
    next.steps.find((x: { id: string }) => x.id === 'risk').timeout_ms = 15000;
    await register(next);
    const global = (await unary(decision.replan.bind(decision), { planId: first.planId, scope: 'REPLAN_SCOPE_GLOBAL', failedStepId: 'risk', error: undefined } as never, withKey(s.key))).plan!;
    expect(global).toMatchObject({ replacesPlanId: first.planId, assemblyVersion: '1.0.1' });
    expect(global.planHash).not.toBe(first.planHash);

    const unknown = await failure(unary(decision.replan.bind(decision), { planId: first.planId, scope: 'REPLAN_SCOPE_LOCAL', failedStepId: 'nope', error: undefined } as never, withKey(s.key)));
    expect(unknown.code).toBe(status.INVALID_ARGUMENT);
  });

  it('plans with a version another core stored as soon as that core tells this one', async () => {
    const plan = async () => (await unary(decision.plan.bind(decision), planRequest() as never, withKey(s.key))).plan!.assemblyVersion;
    const before = await plan();
    const [row] = await s.orm.em.fork().execute<{ tenant_id: string }[]>("SELECT tenant_id FROM assemblies WHERE assembly_id = 'analyze_portfolio' AND version = ?", [before]);
    const next = referenceAssembly() as AssemblyKey;
    next.version = '1.0.2';
    // Written as another core's register writes it: not through this core's decision plane.
    expect(await insertAssembly(s.orm.em.fork(), row!.tenant_id, next)).toBe(true);
    await expect.poll(plan).toBe('1.0.2');
  });
});

describe('the PEP', () => {
  it('refuses a plan with a capability outside the whitelist at PLAN_CHECK, with COMPLIANCE, before any step runs', async () => {
    const a = referenceAssembly();
    a.version = '1.2.0';
    a.capabilities.push({ name: 'shell.exec', kind: 'TOOL' });
    a.steps.push({ id: 'export', label: 'Export to a shell', tool_name: 'shell.exec', dependencies: ['value_positions'] });
    await register(a);

    const res = await s.http('/v1/contracts:submit', { method: 'POST', json: request({ execution_preferences: { progress_granularity: 'step' } }) });
    const done = await pollUntilDone(s.http, (await res.json()).task.ticket);
    expect(done.status).toBe('FAILED');
    expect(done.error).toMatchObject({ code: 'CAPABILITY_NOT_WHITELISTED', category: 'COMPLIANCE', retryable: false, details: { capability: 'shell.exec' } });
    // The plan critic stopped it: nothing ran.
    expect(done.progress.phase).toBe('plan');
    expect(done.progress.steps ?? []).toEqual([]);
    const trace = await (await s.http(`/v1/tickets/${done.ticket}/trace`)).json();
    expect(trace.events.filter((e: { type: string }) => e.type === 'AGENT_DECISION').map((e: { payload: { role: string; success: boolean } }) => [e.payload.role, e.payload.success])).toContainEqual(['PLAN_CRITIC', false]);
    const [plan] = await s.orm.em.fork().execute<{ plan: { whitelist: { name: string }[] } }[]>('SELECT plan FROM frozen_plans WHERE ticket = ?', [done.ticket]);
    expect(plan!.plan.whitelist.map((c) => c.name)).not.toContain('shell.exec');
  });
});

describe('steps that hang', () => {
  let gate: http.Server;
  let gateUrl = '';
  const calls: http.ServerResponse[] = [];

  beforeAll(async () => {
    // A tool that never answers until the test lets it.
    gate = http.createServer(async (req, res) => {
      for await (const _ of req);
      calls.push(res);
    });
    await new Promise<void>((r) => gate.listen(0, '127.0.0.1', r));
    gateUrl = `http://127.0.0.1:${(gate.address() as AddressInfo).port}`;
    expect((await s.http('/v1/tools/register', { method: 'POST', json: { name: 'gate', kind: 'http', endpoint: gateUrl, timeout_ms: 60_000 } })).status).toBe(200);
  });
  afterAll(async () => {
    gate.closeAllConnections();
    await new Promise((r) => gate.close(r));
  });

  const withGate = async (version: string, timeoutMs: number) => {
    const a = referenceAssembly();
    a.version = version;
    a.capabilities.push({ name: 'tool.gate', kind: 'TOOL' });
    a.steps.push({ id: 'gate', label: 'Wait at the gate', tool_name: 'tool.gate', input: {}, dependencies: ['value_positions'], timeout_ms: timeoutMs });
    a.steps.find((x: { id: string }) => x.id === 'highlights').dependencies.push('gate');
    await register(a);
  };

  it('cancels a ticket in the middle of execute: the running step stops, the rest never start', async () => {
    await withGate('1.3.0', 60_000);
    const before = calls.length;
    const res = await s.http('/v1/contracts:submit', { method: 'POST', json: request({ execution_preferences: { progress_granularity: 'step' } }) });
    const ticket = (await res.json()).task.ticket;
    await expect.poll(() => calls.length, { timeout: 5000 }).toBe(before + 1);
    // While it hangs, the poll shows the running step and what is computed so far. A step
    // beside the gate may end up to ABC_STEP_START_DEFER_MS after the gate's write-ahead
    // start is visible (its end waits for its batch's review that long), so poll for both.
    await expect
      .poll(async () => {
        const t = await (await s.http(`/v1/tickets/${ticket}`)).json();
        return { running: t.progress.steps.filter((x: { status: string }) => x.status === 'RUNNING').map((x: { step_id: string }) => x.step_id), sections: Object.keys(t.partial_result ?? {}) };
      }, { timeout: 5000 })
      .toEqual({ running: ['gate'], sections: expect.arrayContaining(['overview', 'holdings']) });
    const running = await (await s.http(`/v1/tickets/${ticket}`)).json();
    expect(running).toMatchObject({ status: 'RUNNING', ttl_seconds: 3, progress: { phase: 'execute', current_step: 'gate' } });
    expect(running.progress.percent).toBeGreaterThan(15);
    expect(running.progress.percent).toBeLessThan(85);
    expect(Object.keys(running.partial_result)).toEqual(expect.arrayContaining(['overview', 'holdings']));
    expect(running.result).toBeUndefined();
    const cancel = await s.http(`/v1/tickets/${ticket}:cancel`, { method: 'POST', json: { reason: 'no longer needed' } });
    expect(await cancel.json()).toEqual({ ticket, status: 'CANCELED' });
    await expect
      .poll(async () => {
        const poll = await (await s.http(`/v1/tickets/${ticket}`)).json();
        return Object.fromEntries(poll.progress.steps.map((x: { step_id: string; status: string }) => [x.step_id, x.status]));
      }, { timeout: 5000 })
      .toMatchObject({ load_portfolio: 'SUCCEEDED', gate: 'FAILED', highlights: 'SKIPPED' });
    const poll = await (await s.http(`/v1/tickets/${ticket}`)).json();
    expect(poll).toMatchObject({ status: 'CANCELED' });
    expect(poll.progress.steps.find((x: { step_id: string }) => x.step_id === 'gate').message).toMatch(/cancelled/);
  });

  it('runs steps whose dependencies are met in parallel', async () => {
    const a = referenceAssembly();
    a.version = '1.3.5';
    a.capabilities.push({ name: 'tool.gate', kind: 'TOOL' });
    for (const id of ['gate_a', 'gate_b']) a.steps.push({ id, label: id, tool_name: 'tool.gate', input: { id }, dependencies: ['value_positions'], timeout_ms: 10_000 });
    a.steps.find((x: { id: string }) => x.id === 'highlights').dependencies.push('gate_a', 'gate_b');
    await register(a);
    const before = calls.length;
    const res = await s.http('/v1/contracts:submit', { method: 'POST', json: request() });
    const ticket = (await res.json()).task.ticket;
    // Both gates are called while neither has answered: they run at once.
    await expect.poll(() => calls.length, { timeout: 5000 }).toBe(before + 2);
    for (const waiting of calls.slice(before)) waiting.writeHead(200, { 'content-type': 'application/json' }).end('{"open":true}');
    expect((await pollUntilDone(s.http, ticket)).status).toBe('SUCCEEDED');
  });

  it('fails a step that outlives its timeout_ms with a TIMEOUT error', async () => {
    await withGate('1.4.0', 300);
    const res = await s.http('/v1/contracts:submit', { method: 'POST', json: request({ execution_preferences: { progress_granularity: 'step' } }) });
    const done = await pollUntilDone(s.http, (await res.json()).task.ticket);
    expect(done.status).toBe('FAILED');
    expect(done.error).toMatchObject({ code: 'STEP_TIMEOUT', category: 'TIMEOUT', retryable: true });
    expect(done.progress.steps.find((x: { step_id: string }) => x.step_id === 'gate').status).toBe('FAILED');
  });
});
