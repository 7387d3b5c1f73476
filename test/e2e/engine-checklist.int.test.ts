// Seed 002 §6, the implementation checklist: one test per line.
import { SecretBox } from '../../src/access/secret-box.js';
import { Secrets } from '../../src/access/secrets.js';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRACE_EVENT_TYPES, frozen, type AgentOutput, type GlobalState } from '../../src/domain/engine-types.js';
import { AbcError } from '../../src/domain/errors.js';
import { Memory } from '../../src/store/memory.js';
import { restoreSnapshot, snapshotOf } from '../../src/engine/snapshots.js';
import { snapshotsInsert } from '../../src/store/snapshot-store.js';
import { toStructured } from '../../src/engine/structured.js';
import { Roles } from '../../src/engine/roles/index.js';
import type { CognitiveAgent, EngineContextView } from '../../src/engine/roles/agent.js';
import { BUILTIN_TOOLS } from '../../src/execution/builtin-tools.js';
import { BUILTIN_UNITS } from '../../src/execution/builtin-units.js';
import { PACKS } from '../support/core.js';
import { ToolFailure } from '../../src/execution/tool-runner.js';
import type { StepRow } from '../../src/store/ticket-store.js';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { importSamplePortfolios, pollUntilDone, referenceAssembly, request } from '../support/contracts.js';
import { startToolServer, type ToolServer } from '../support/tool-server.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const sources = (dir: string): string[] =>
  readdirSync(dir).flatMap((n) => {
    const full = path.join(dir, n);
    return statSync(full).isDirectory() ? sources(full) : full.endsWith('.ts') ? [full] : [];
  });
const rel = (f: string) => path.relative(ROOT, f);

let s: TestStack;
let tools: ToolServer;

beforeAll(async () => {
  tools = await startToolServer();
  s = await startTestStack({ contracts: { workers: 2 } });
  await importSamplePortfolios(s.orm);
  await s.http('/v1/tools/register', { method: 'POST', json: { name: 'gate', kind: 'http', endpoint: tools.endpoint('gate'), timeout_ms: 10_000 } });
});
afterAll(async () => {
  await s?.close();
  await tools?.close();
});

type Json = Record<string, any>;
const submit = async (): Promise<string> => (await (await s.http('/v1/contracts:submit', { method: 'POST', json: request() })).json()).task.ticket;
const trace = async (ticket: string): Promise<Json[]> => (await (await s.http(`/v1/tickets/${ticket}/trace`)).json()).events;

async function gated(version: string): Promise<void> {
  const a = referenceAssembly();
  a.version = version;
  a.capabilities.push({ name: 'tool.gate', kind: 'TOOL' });
  for (const id of ['gate_a', 'gate_b']) a.steps.push({ id, label: id, tool_name: 'tool.gate', input: {}, dependencies: ['value_positions'] });
  expect((await s.http('/v1/assemblies', { method: 'POST', json: a })).status).toBe(201);
}

describe('seed 002 §6 checklist', () => {
  it('state: only the engine modifies lifecycle_state; agents get frozen state they cannot change', async () => {
    const files = sources(path.join(ROOT, 'src'));
    // The lifecycle column is bound to its machine in one place, and written only by the one transition writer.
    const bindings = files.filter((f) => /state: 'lifecycle_state'|lifecycle_state = \?/.test(readFileSync(f, 'utf8')));
    expect(bindings.map(rel)).toEqual(['src/store/ticket-store.ts']);
    const movers = files.filter((f) => /\btransitionTicket\b/.test(readFileSync(f, 'utf8'))).map(rel);
    expect(movers.filter((f) => f !== 'src/store/ticket-store.ts').every((f) => f.startsWith('src/engine/') && !f.startsWith('src/engine/roles/'))).toBe(true);
    for (const f of sources(path.join(ROOT, 'src/engine/roles'))) expect(readFileSync(f, 'utf8'), rel(f)).not.toMatch(/ticket-store|execution-contracts|snapshots\.js/);

    const tries: string[] = [];
    const meddler: CognitiveAgent = {
      name: 'meddler',
      role: 'REVIEWER',
      validateOutput: () => true,
      async run(global, context): Promise<AgentOutput> {
        for (const write of [() => ((global as { lifecycle_state: string }).lifecycle_state = 'COMPLETED'), () => ((context.active_steps as Record<string, string>).x = 'SUCCEEDED'), () => (context.errors as string[]).push('x')]) {
          try {
            write();
            tries.push('changed');
          } catch (error) {
            tries.push((error as Error).name);
          }
        }
        return { success: true, confidence: 1, errors: [], role: 'REVIEWER' };
      },
    };
    const roles = new Roles({ REVIEWER: meddler } as never, { em: () => s.orm.em.fork(), agentIdleTimeoutMs: 1000, secrets: new Secrets(s.orm, SecretBox.ephemeral(), 1000) });
    const global: GlobalState = frozen({ execution_id: 'e', original_goal: 'g', lifecycle_state: 'STEP_REVIEW', iteration_count: 0, trace_id: 't', created_at: 'now' });
    await roles.run('REVIEWER', undefined, global, frozen({ active_steps: {}, errors: [] } as unknown as EngineContextView), undefined, 'default');
    expect(tries).toEqual(['TypeError', 'TypeError', 'TypeError']);
    expect(global.lifecycle_state).toBe('STEP_REVIEW');
  });

  it('tool metadata: every tool and built-in unit declares timeout, permission_level and side_effect', async () => {
    for (const [name, m] of [...Object.entries(BUILTIN_UNITS), ...PACKS.flatMap((p) => Object.entries(p.units))].map(([n, u]) => [n, u.meta] as const)) {
      expect(m.timeout_ms, name).toBeGreaterThan(0);
      expect(['PUBLIC', 'INTERNAL', 'ADMIN'], name).toContain(m.permission_level);
      expect(typeof m.side_effect, name).toBe('boolean');
    }
    for (const t of BUILTIN_TOOLS) expect([t.timeoutMs > 0, typeof t.sideEffect, t.permissionLevel]).toEqual([true, 'boolean', expect.stringMatching(/^(PUBLIC|INTERNAL|ADMIN)$/)]);
    const listed = (await (await s.http('/v1/tools')).json()).tools as Json[];
    for (const t of listed) expect(t).toMatchObject({ timeout_ms: expect.any(Number), permission_level: expect.stringMatching(/^(PUBLIC|INTERNAL|ADMIN)$/), side_effect: expect.any(Boolean) });
  });

  it('errors: every exception becomes a StructuredError (code, severity, retryable, suggested_action)', async () => {
    expect(toStructured(new TypeError('x is undefined'))).toMatchObject({ code: 'internal_error', severity: 'WARNING', retryable: true, suggested_action: 'RETRY', metadata: { category: 'INTERNAL' } });
    expect(toStructured(new AbcError('PERMISSION_DENIED', { code: 'NOPE', category: 'COMPLIANCE', message: 'no', retryable: false, details: { tool: 't' } }))).toMatchObject({ code: 'NOPE', severity: 'CRITICAL', suggested_action: 'HALT', metadata: { category: 'COMPLIANCE', tool: 't' } });
    const own = new AbcError('INTERNAL', { code: 'tool_failed', category: 'EXECUTION', message: 'm', retryable: false, details: { tool_error: { code: 'RATE', severity: 'INFO', retryable: true, suggested_action: 'RETRY' } } });
    expect(toStructured(own)).toMatchObject({ code: 'RATE', severity: 'INFO', retryable: true, suggested_action: 'RETRY' });
    expect(new ToolFailure('tool_failed', 'x', { detail: { code: 'A' } }).detail).toEqual({ code: 'A' });

    // Through the engine: a tool answering garbage is an ERROR_OCCURRED with the full shape.
    await s.http('/v1/tools/register', { method: 'POST', json: { name: 'garbage', kind: 'http', endpoint: tools.endpoint('garbage'), timeout_ms: 5000 } });
    tools.script('garbage', { status: 502, body: 'not json at all' });
    const a = referenceAssembly();
    a.version = '1.50.0';
    a.capabilities.push({ name: 'tool.garbage', kind: 'TOOL' });
    a.steps.push({ id: 'garbage', label: 'garbage', tool_name: 'tool.garbage', input: {}, dependencies: ['value_positions'] });
    a.engine = { max_consecutive_failures: 1 };
    await s.http('/v1/assemblies', { method: 'POST', json: a });
    const done = await pollUntilDone(s.http, await submit());
    const error = (await trace(done.ticket)).find((e) => e.type === 'ERROR_OCCURRED')!.payload;
    expect(Object.keys(error).sort()).toEqual(['code', 'message', 'metadata', 'retryable', 'severity', 'suggested_action']);
    expect(error).toMatchObject({ code: 'tool_failed', metadata: { step_id: 'garbage', capability: 'tool.garbage' } });
  });

  it('memory: every call names its scope; scopes are apart, and EPHEMERAL ends with its step', async () => {
    const memory = new Memory(() => s.orm.em.fork());
    await memory.store('default', 'k', { v: 'ephemeral' }, 'EPHEMERAL', 'x:step');
    await memory.store('default', 'k', { v: 'session' }, 'SESSION', 'x');
    await memory.store('default', 'k', { v: 'global' }, 'GLOBAL', 'ignored');
    expect([await memory.retrieve('default', 'k', 'EPHEMERAL', 'x:step'), await memory.retrieve('default', 'k', 'SESSION', 'x'), await memory.retrieve('default', 'k', 'GLOBAL', 'other')]).toEqual([{ v: 'ephemeral' }, { v: 'session' }, { v: 'global' }]);
    expect(await memory.retrieve('default', 'k', 'SESSION', 'y')).toBeUndefined();
    // Each scope is searched apart; GLOBAL through its index, the others over their few rows.
    expect((await memory.search('default', 'session', 'SESSION', 'x')).map((e) => e.value)).toEqual([{ v: 'session' }]);
    expect((await memory.search('default', 'ephemeral', 'EPHEMERAL', 'x:step')).map((e) => e.value)).toEqual([{ v: 'ephemeral' }]);
    expect((await memory.search('default', 'global', 'GLOBAL', 'any')).map((e) => e.value)).toEqual([{ v: 'global' }]);
    expect(await memory.search('default', 'global', 'SESSION', 'x')).toEqual([]);
    // Memory is per tenant: GLOBAL is one tenant's, never another's.
    expect(await memory.retrieve('acme', 'k', 'GLOBAL', 'any')).toBeUndefined();
    expect(await memory.search('acme', 'global', 'GLOBAL', 'any')).toEqual([]);

    await gated('1.51.0');
    tools.script('gate', { hold: true, body: { open: true } });
    const ticket = await submit();
    await expect.poll(() => tools.held('gate'), { timeout: 5000 }).toBe(2);
    // A step without side effects is recorded as started once it has run for START_DEFER_MS.
    await expect.poll(() => memory.retrieve('default', 'step_context', 'EPHEMERAL', `${ticket}:gate_a`)).toMatchObject({ step_id: 'gate_a' });
    tools.release('gate');
    expect((await pollUntilDone(s.http, ticket)).status).toBe('SUCCEEDED');
    const left = await s.orm.em.fork().execute<{ n: number }[]>("SELECT count(*)::int AS n FROM memory WHERE scope = 'EPHEMERAL' AND starts_with(scope_id, ?)", [`${ticket}:`]);
    expect(left[0]!.n).toBe(0);
    tools.script('gate', { body: { open: true } });
  });

  it('observability: the key path records the standard TraceEventTypes', async () => {
    const done = await pollUntilDone(s.http, await submit());
    const events = await trace(done.ticket);
    const types = new Set(events.map((e) => e.type));
    for (const t of ['STATE_TRANSITION', 'AGENT_DECISION', 'TOOL_CALL_START', 'TOOL_CALL_END', 'POLICY_EVALUATION', 'SNAPSHOT_CREATED']) expect(types, t).toContain(t);
    // Upper-case types are seed 002's, and only those.
    for (const t of types) if (t === t.toUpperCase()) expect(TRACE_EVENT_TYPES as readonly string[]).toContain(t);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    const roles = new Set(events.filter((e) => e.type === 'AGENT_DECISION').map((e) => e.payload.role));
    expect([...roles].sort()).toEqual(['CONTEXT_BUILDER', 'PLANNER', 'PLAN_CRITIC', 'REVIEWER', 'STEP_EXECUTOR']);
  });

  it('permissions: check_tool_permission runs before every tool call', async () => {
    const done = await pollUntilDone(s.http, await submit());
    const events = await trace(done.ticket);
    const starts = events.filter((e) => e.type === 'TOOL_CALL_START');
    expect(starts.length).toBeGreaterThan(3);
    for (const start of starts) {
      const before = events.filter((e) => e.seq < start.seq && e.type === 'POLICY_EVALUATION' && e.payload.step_id === start.payload.step_id);
      expect(before.at(-1)?.payload, start.payload.step_id).toMatchObject({ allow: true, role: 'STEP_EXECUTOR' });
    }
  });

  it('parallel: active_steps tracks the steps running at once', async () => {
    await gated('1.52.0');
    tools.script('gate', { hold: true, body: { open: true } });
    const ticket = await submit();
    await expect.poll(() => tools.held('gate'), { timeout: 5000 }).toBe(2);
    const running = async () => {
      const ctx = await (await s.http(`/v1/tickets/${ticket}/context`)).json();
      return Object.entries(ctx.execution_context.active_steps).filter(([, v]) => v === 'RUNNING').map(([k]) => k).sort();
    };
    await expect.poll(running).toEqual(['gate_a', 'gate_b']);
    tools.release('gate');
    await pollUntilDone(s.http, ticket);
    const starts = (await trace(ticket)).filter((e) => e.type === 'TOOL_CALL_START' && e.payload.step_id.startsWith('gate_'));
    expect(starts.at(-1)!.payload.active_steps).toEqual(expect.arrayContaining(['gate_a', 'gate_b']));
    tools.script('gate', { body: { open: true } });
  });

  it('rollback: the snapshot manager restores the ExecutionContext it saved', async () => {
    const steps = [
      { step_id: 'a', status: 'SUCCEEDED', output: { n: 1 } },
      { step_id: 'b', status: 'PENDING', output: null },
    ] as StepRow[];
    const rec = { replan: { scope: 'LOCAL', failed_step_id: 'b' }, avoid: ['tool.x'], approved_steps: ['c'], snapshot_id: 'snap_prev' } as never;
    const { row } = snapshotOf('tkt_snapshot_test', 'STEP_REVIEW', 'batch:1', 'plan_1', steps, rec);
    const id = row.snapshotId;
    const insert = snapshotsInsert([row]);
    await s.orm.em.fork().execute(insert.sql, insert.params);
    expect(await restoreSnapshot(s.orm.em.fork(), id)).toEqual({
      label: 'batch:1',
      plan_id: 'plan_1',
      steps: { a: { status: 'SUCCEEDED' }, b: { status: 'PENDING' } },
      record: { replan: { scope: 'LOCAL', failed_step_id: 'b' }, avoid: ['tool.x'], approved_steps: ['c'], snapshot_id: 'snap_prev' },
    });
  });
});
