// The platform policy (ABC_POLICY_FILE) decides contract plan steps as it
// decides agents' tool calls: a block fails the ticket with COMPLIANCE before
// the tool is called; require_approval holds the execution in WAIT_HUMAN until
// a human continues it, and the step then runs once.
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeys } from '../../src/access/api-keys.js';
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

  it('holds a step for approval in WAIT_HUMAN, in the same approvals inbox as tool calls; approving runs it exactly once', async () => {
    await policy([{ id: 'ask-gate', tools: ['tool.gate'], decision: 'require_approval', reason: 'a human opens gates' }]);
    await new Promise((r) => setTimeout(r, 1200)); // the file is polled every 500 ms
    tools.script('gate', { body: { open: true } });
    const ticket = await submit();
    await expect.poll(async () => (await s.http(`/v1/tickets/${ticket}`)).headers.get('x-abc-lifecycle-state'), { timeout: 15_000 }).toBe('WAIT_HUMAN');
    expect(tools.calls('gate')).toHaveLength(0);
    // GET /v1/approvals with no filter is the tenant's inbox, across tool calls and contract steps.
    const inbox = (await (await s.http('/v1/approvals?status=PENDING')).json()).approvals;
    const asked = inbox.find((a: Json) => a.ticket === ticket);
    expect(asked).toMatchObject({ step_id: 'gate_a', tool_name: 'tool.gate', run_id: null, tool_call_id: null, status: 'PENDING' });
    expect(asked.args_summary).toContain('a human opens gates');
    const context = await (await s.http(`/v1/tickets/${ticket}/context`)).json();
    expect(context.human_request).toMatchObject({ kind: 'step_approval', step_id: 'gate_a', approval_id: asked.approval_id });

    const decided = await s.http(`/v1/approvals/${asked.approval_id}:decide`, { method: 'POST', json: { decision: 'approve', reason: 'open it' }, headers: { 'x-user-id': 'ops' } });
    expect(decided.status).toBe(200);
    expect((await decided.json()).approval).toMatchObject({ status: 'APPROVED', decided_by: 'user:ops' });
    // A second decision is a conflict; the step runs once.
    const again = await s.http(`/v1/approvals/${asked.approval_id}:decide`, { method: 'POST', json: { decision: 'approve' } });
    expect(again.status).toBe(409);
    expect((await again.json()).error.code).toBe('approval_conflict');
    expect((await pollUntilDone(s.http, ticket)).status).toBe('SUCCEEDED');
    expect(tools.calls('gate')).toHaveLength(1);
  });

  it("settles a step's approval when the ticket's feedback answers it, or rejects it", async () => {
    const ticket = await submit();
    await expect.poll(async () => (await s.http(`/v1/tickets/${ticket}`)).headers.get('x-abc-lifecycle-state'), { timeout: 15_000 }).toBe('WAIT_HUMAN');
    const [asked] = (await (await s.http(`/v1/approvals?ticket=${ticket}`)).json()).approvals;
    expect((await s.http(`/v1/tickets/${ticket}:feedback`, { method: 'POST', json: { action: 'reject', feedback: 'not today' } })).status).toBe(200);
    const [after] = (await (await s.http(`/v1/approvals?ticket=${ticket}`)).json()).approvals;
    expect(after).toMatchObject({ approval_id: asked.approval_id, status: 'REJECTED', reason: 'not today' });
    expect((await pollUntilDone(s.http, ticket)).status).toBe('FAILED');
    // Another tenant's key finds no such approval, nor any in its inbox.
    const keys = new ApiKeys(s.orm);
    await keys.createTenant('elsewhere');
    const { key } = await keys.create('elsewhere', { tenantId: 'elsewhere' });
    expect((await s.http(`/v1/approvals/${asked.approval_id}:decide`, { method: 'POST', json: { decision: 'approve' }, key })).status).toBe(404);
    expect((await (await s.http('/v1/approvals', { key })).json()).approvals).toEqual([]);
  });

  it('asks the policy for a fallback too: a blocked fallback never runs', async () => {
    await policy([{ id: 'no-vault', tools: ['vault'], when: { actions: ['contract_step'] }, decision: 'block', reason: 'the vault is closed' }]);
    await new Promise((r) => setTimeout(r, 1200));
    for (const name of ['flaky', 'vault']) {
      expect((await s.http('/v1/tools/register', { method: 'POST', json: { name, kind: 'http', endpoint: tools.endpoint(name), timeout_ms: 5000 } })).status).toBe(200);
    }
    tools.script('flaky', { status: 500, body: { error: { code: 'down', message: 'flaky is down' } } });
    const a = referenceAssembly();
    a.version = '1.71.0';
    a.capabilities.push({ name: 'tool.flaky', kind: 'TOOL' }, { name: 'tool.vault', kind: 'TOOL' });
    a.steps.push({ id: 'open', label: 'open', tool_name: 'tool.flaky', fallback_tool: 'tool.vault', input: {}, dependencies: ['value_positions'] });
    expect((await s.http('/v1/assemblies', { method: 'POST', json: a })).status).toBe(201);
    const done = await pollUntilDone(s.http, await submit());
    expect(done.status).toBe('FAILED');
    expect(tools.calls('flaky').length).toBeGreaterThan(0);
    expect(tools.calls('vault')).toHaveLength(0);
    const blocked = (await trace(done.ticket)).find((e) => e.type === 'ERROR_OCCURRED' && e.payload.code === 'POLICY_BLOCKED');
    expect(blocked?.payload.message).toBe('blocked by policy rule no-vault: the vault is closed');
  });
});
