// Phase workflow definitions over HTTP and gRPC: registered at boot from
// workflows/, and over the API into the caller's tenant; insert-only,
// checked by their schema and their references, additive within a major
// version; each version's phase table in the observer's topology.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeys } from '../../src/access/api-keys.js';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { failure, unary, withKey } from '../support/grpc.js';

let s: TestStack;
let acme: string; // an admin key of tenant acme

beforeAll(async () => {
  s = await startTestStack();
  const keys = new ApiKeys(s.orm);
  await keys.createTenant('acme');
  acme = (await keys.create('acme-admin', { tenantId: 'acme' })).key;
});
afterAll(() => s?.close());

type Json = Record<string, any>;
const reference = (): Json => JSON.parse(readFileSync('workflows/wealth-onboarding/1.0.0.json', 'utf8'));
const helpdesk = (version = '1.0.0'): Json => ({
  workflow_id: 'helpdesk',
  version,
  initial_phase: 'triage',
  phases: [
    { id: 'triage', instructions: 'Find out what is wrong.', required_fields: ['issue'], next_phase: [{ to: 'resolve' }] },
    { id: 'resolve', instructions: 'Fix it.', tools: { allowed: ['echo'], tool_choice: 'auto' } },
  ],
  transitions: [{ from: 'triage', to: 'resolve', trigger: 'handler_completed' }],
});
const post = (json: unknown, key = s.key, query = '') => s.http(`/v1/workflows${query}`, { method: 'POST', key, json });

describe('workflow definitions', () => {
  it('are registered at boot from workflows/, as the platform’s', async () => {
    const res = await s.http('/v1/workflows/wealth-onboarding');
    expect(res.status).toBe(200);
    expect((await res.json()).workflow).toMatchObject({ workflow_id: 'wealth-onboarding', version: '1.0.0', platform: true, definition: reference() });
    // Every tenant sees them.
    expect((await (await s.http('/v1/workflows', { key: acme })).json()).workflows.map((w: Json) => w.workflow_id)).toContain('wealth-onboarding');
  });

  it("are registered into the caller's tenant, once: the same again is a no-op, other content a conflict", async () => {
    const created = await post(helpdesk(), acme);
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ created: true, workflow: { workflow_id: 'helpdesk', version: '1.0.0', platform: false } });
    const again = await post(helpdesk(), acme);
    expect(again.status).toBe(200);
    expect((await again.json()).created).toBe(false);
    const other = helpdesk();
    other.phases[0].instructions = 'Something else.';
    const conflict = await post(other, acme);
    expect(conflict.status).toBe(409);
    expect((await conflict.json()).error).toMatchObject({ code: 'WORKFLOW_VERSION_EXISTS', details: { pointer: '/definition/version' } });
    // Another tenant does not see it, and reads it as an id nobody has.
    const hidden = await s.http('/v1/workflows/helpdesk');
    expect(hidden.status).toBe(404);
    expect((await hidden.json()).error).toMatchObject({ code: 'WORKFLOW_NOT_FOUND' });
  });

  it('stay additive within a major version, and may break in a new one', async () => {
    const added = helpdesk('1.1.0');
    added.phases.push({ id: 'survey', instructions: 'Ask how it went.' });
    added.transitions.push({ from: 'resolve', to: 'survey', trigger: 'handler_completed' });
    expect((await post(added, acme)).status).toBe(201);

    const removed = helpdesk('1.2.0');
    const refused = await post(removed, acme);
    expect(refused.status).toBe(412);
    expect((await refused.json()).error).toMatchObject({ code: 'WORKFLOW_NOT_ADDITIVE', details: { changes: ['phase survey was removed', 'transition resolve -> survey on handler_completed was removed'] } });
    expect((await post(helpdesk('2.0.0'), acme)).status).toBe(201);

    const latest = await (await s.http('/v1/workflows/helpdesk', { key: acme })).json();
    expect(latest.workflow.version).toBe('2.0.0');
    const pinned = await (await s.http('/v1/workflows/helpdesk?version=1.1.0', { key: acme })).json();
    expect(pinned.workflow.definition.phases.map((p: Json) => p.id)).toEqual(['triage', 'resolve', 'survey']);
    const listed = await (await s.http('/v1/workflows?workflow_id=helpdesk', { key: acme })).json();
    expect(listed.workflows.map((w: Json) => w.version)).toEqual(['1.0.0', '1.1.0', '2.0.0']);
  });

  it.each([
    ['a missing field', (d: Json) => delete d.initial_phase, '/definition/initial_phase'],
    ['an unknown field', (d: Json) => (d.phases[0].colour = 'red'), '/definition/phases/0/colour'],
    ['a phase id that is not snake_case', (d: Json) => (d.phases[1].id = 'Resolve!'), '/definition/phases/1/id'],
    ['a transition to no phase', (d: Json) => (d.transitions[0].to = 'nowhere'), '/definition/transitions/0/to'],
    ['a next phase no transition allows', (d: Json) => (d.phases[0].next_phase = [{ to: 'triage' }]), '/definition/phases/0/next_phase/0/to'],
    ['a tool_choice outside the allowed tools', (d: Json) => (d.phases[1].tools.tool_choice = { name: 'http.get' }), '/definition/phases/1/tools/tool_choice/name'],
    ['a bad trigger', (d: Json) => (d.transitions[0].trigger = 'whenever'), '/definition/transitions/0/trigger'],
  ])('refuses %s with 400 INVALID_WORKFLOW naming the place', async (_, change, pointer) => {
    const def = helpdesk('9.0.0');
    change(def);
    const res = await post(def, acme);
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: 'INVALID_WORKFLOW', details: { pointer } });
  });

  it("go into the platform's catalogue only from the default tenant's admin", async () => {
    const refused = await post(helpdesk(), acme, '?platform=true');
    expect(refused.status).toBe(403);
    const shared = { ...helpdesk(), workflow_id: 'shared-desk' };
    expect((await post(shared, s.key, '?platform=true')).status).toBe(201);
    expect((await (await s.http('/v1/workflows/shared-desk', { key: acme })).json()).workflow).toMatchObject({ platform: true });
  });

  it('are served over gRPC with the same answers', async () => {
    const { workflows } = s.clients;
    const got = await unary(workflows.getWorkflow.bind(workflows), { workflowId: 'wealth-onboarding', version: '' }, withKey(s.key));
    expect(got.workflow).toMatchObject({ workflowId: 'wealth-onboarding', platform: true });
    const e = await failure(unary(workflows.registerWorkflow.bind(workflows), { definition: { workflow_id: 'x' }, platform: false }, withKey(s.key)));
    expect(e.code).toBe(3);
  });
});

describe('the topology', () => {
  it("shows each workflow version's phase table beside ABC's own machines, per tenant", async () => {
    const machines = (await (await s.http('/api/execution/topology', { key: acme })).json()).machines as Json[];
    const names = machines.map((m) => m.machine);
    expect(names).toEqual(expect.arrayContaining(['run', 'workflow:wealth-onboarding@1.0.0', 'workflow:helpdesk@2.0.0']));
    const wealth = machines.find((m) => m.machine === 'workflow:wealth-onboarding@1.0.0')!;
    expect(wealth.initial_status).toBe('kyc');
    expect(wealth.edges).toContainEqual(expect.objectContaining({ from_status: 'stress_test', to_status: 'strategy', trigger: 'handler_completed:strategy' }));
    const mine = (await (await s.http('/api/execution/topology')).json()).machines.map((m: Json) => m.machine);
    expect(mine).not.toContain('workflow:helpdesk@2.0.0');
    const one = await s.http('/api/execution/topology?machine=workflow:wealth-onboarding@1.0.0');
    expect((await one.json()).machines).toHaveLength(1);
  });
});
