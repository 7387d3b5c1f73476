// The platform policy (ABC_POLICY_FILE) decides contract plan steps as it
// decides agents' tool calls: a block fails the ticket with COMPLIANCE before
// the tool is called; require_approval holds the execution in WAIT_HUMAN until
// a human continues it, and the step then runs once.
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { importSamplePortfolios, pollUntilDone, referenceAssembly, request } from '../support/contracts.js';
import { startToolServer, type ToolServer } from '../support/tool-server.js';

let s: TestStack;
let tools: ToolServer;
let policyFile: string;

const policy = (rules: unknown[]) => writeFile(policyFile, JSON.stringify({ version: 7, default: 'allow', rules }));

beforeAll(async () => {
  policyFile = path.join(await mkdtemp(path.join(os.tmpdir(), 'abc-contract-policy-')), 'policy.json');
  await policy([{ id: 'no-gate', tools: ['gate'], when: { actions: ['contract_step'] }, decision: 'block', reason: 'gates are closed' }]);
  tools = await startToolServer();
  s = await startTestStack({ policyFile, contracts: { workers: 2 } });
  await importSamplePortfolios(s.orm);
  expect((await s.http('/v1/tools/register', { method: 'POST', json: { name: 'gate', kind: 'http', endpoint: tools.endpoint('gate'), timeout_ms: 10_000 } })).status).toBe(200);
  const a = referenceAssembly();
  a.version = '1.70.0';
  a.capabilities.push({ name: 'tool.gate', kind: 'TOOL' });
  a.steps.push({ id: 'gate_a', label: 'gate_a', tool_name: 'tool.gate', input: {}, dependencies: ['value_positions'] });
  expect((await s.http('/v1/assemblies', { method: 'POST', json: a })).status).toBe(201);
});
afterAll(async () => {
  await s?.close();
  await tools?.close();
});

type Json = Record<string, any>;
const submit = async (): Promise<string> => (await (await s.http('/v1/contracts:submit', { method: 'POST', json: request() })).json()).task.ticket;
const trace = async (ticket: string): Promise<Json[]> => (await (await s.http(`/v1/tickets/${ticket}/trace`)).json()).events;

describe('the platform policy over contract steps', () => {
  it('blocks a capability: the ticket fails with COMPLIANCE and the tool is never called', async () => {
    const done = await pollUntilDone(s.http, await submit());
    expect(done.status).toBe('FAILED');
    expect(done.error).toMatchObject({ category: 'COMPLIANCE' });
    expect(tools.calls('gate')).toHaveLength(0);
    const decision = (await trace(done.ticket)).find((e) => e.type === 'POLICY_EVALUATION' && e.payload.rule_id === 'no-gate');
    expect(decision?.payload).toMatchObject({ allow: false, rule_id: 'no-gate', policy_version: 7, step_id: 'gate_a' });
  });

  it('holds a step for approval in WAIT_HUMAN; continuing runs it exactly once', async () => {
    await policy([{ id: 'ask-gate', tools: ['tool.gate'], decision: 'require_approval', reason: 'a human opens gates' }]);
    await new Promise((r) => setTimeout(r, 1200));
    tools.script('gate', { body: { open: true } });
    const ticket = await submit();
    await expect.poll(async () => (await s.http(`/v1/tickets/${ticket}`)).headers.get('x-abc-lifecycle-state'), { timeout: 15_000 }).toBe('WAIT_HUMAN');
    expect(tools.calls('gate')).toHaveLength(0);
    const context = await (await s.http(`/v1/tickets/${ticket}/context`)).json();
    expect(context.human_request).toMatchObject({ kind: 'step_approval', step_id: 'gate_a' });
    expect((await s.http(`/v1/tickets/${ticket}:feedback`, { method: 'POST', json: { action: 'continue', feedback: 'open it' } })).status).toBe(200);
    expect((await pollUntilDone(s.http, ticket)).status).toBe('SUCCEEDED');
    expect(tools.calls('gate')).toHaveLength(1);
  });
});
