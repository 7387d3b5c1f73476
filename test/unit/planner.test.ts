// The decision plane's compiler is pure: same input and assembly version, same plan and plan_hash.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/domain/hash.js';
import { AssemblyError, checkAssembly, compilePlan, topoOrder, type AssemblyDef } from '../../src/decision/planner.js';

const assembly = JSON.parse(readFileSync('packs/analyze-portfolio/assemblies/analyze_portfolio/1.0.0.json', 'utf8')) as AssemblyDef;
const granted = new Set(['portfolio.read', 'market.read', 'analytics.allocation', 'analytics.risk', 'analytics.performance', 'advice.rules', 'report.highlights']);
const input = () => ({
  intent: 'analyze_portfolio',
  contract: { contract_id: 'com.thaleon.wm:analyze-portfolio', version: '1.0.0' },
  context: { as_of: '2026-11-20', currency: 'USD', risk_profile: { risk_level: 'balanced' }, analysis_scope: { include_risk: true, include_performance: false } },
  input: { portfolio_ref: { portfolio_id: 'pf-1' } },
  output_spec: { format: 'json', detail_level: 'standard' },
});

describe('compilePlan', () => {
  it('gives the same plan and hash for the same input, whatever the key order', () => {
    const a = compilePlan(assembly, input(), granted);
    const reversed = (v: unknown): unknown =>
      v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse().map(([k, x]) => [k, reversed(x)])) : v;
    const shuffled = reversed(input()) as ReturnType<typeof input>;
    const b = compilePlan(assembly, shuffled, granted);
    expect(b.hash).toBe(a.hash);
    expect(b.body).toEqual(a.body);
    expect(a.hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('changes the hash when the input or the grant changes', () => {
    const a = compilePlan(assembly, input(), granted);
    const other = input();
    other.context.currency = 'TWD';
    expect(compilePlan(assembly, other, granted).hash).not.toBe(a.hash);
    expect(compilePlan(assembly, input(), new Set([...granted, 'llm.summarize'])).hash).not.toBe(a.hash);
  });

  it('binds step inputs from the request and skips steps whose condition is false', () => {
    const { body } = compilePlan(assembly, input(), granted);
    const step = (id: string) => body.steps.find((s) => s.id === id)!;
    expect(step('value_positions').input).toEqual({ as_of: '2026-11-20', currency: 'USD' });
    expect(step('load_portfolio').input).toEqual({ input: { portfolio_ref: { portfolio_id: 'pf-1' } } });
    // Absent paths drop the key instead of binding undefined.
    expect(step('risk').input).toEqual({});
    expect(step('performance')).toMatchObject({ skipped: true, skip_reason: 'context.analysis_scope.include_performance is false' });
    // Absent flag: the assembly's default applies.
    expect(step('recommendations').skipped).toBe(false);
  });

  it('whitelists only granted capabilities, and takes the deterministic path without an LLM', () => {
    const { body } = compilePlan(assembly, input(), granted);
    expect(body.whitelist.map((c) => c.name)).toEqual([...granted].sort());
    expect(body.steps.find((s) => s.id === 'highlights')!.tool_name).toBe('report.highlights');
    const withLlm = compilePlan(assembly, input(), new Set([...granted, 'llm.summarize'])).body;
    expect(withLlm.steps.find((s) => s.id === 'highlights')).toMatchObject({ tool_name: 'llm.summarize', fallback_tool: 'report.highlights' });
    // Without the LLM the deterministic path is the step itself, with nothing to fall back to.
    expect(body.steps.find((s) => s.id === 'highlights')!.fallback_tool).toBeUndefined();
  });

  it('keeps an ungranted capability without fallback in the plan, for the PEP to refuse', () => {
    const risky: AssemblyDef = { ...assembly, capabilities: [...assembly.capabilities, { name: 'shell.exec', kind: 'TOOL' }], steps: [...assembly.steps, { id: 'shell', tool_name: 'shell.exec', dependencies: ['load_portfolio'] }] };
    const { body } = compilePlan(risky, input(), granted);
    expect(body.steps.find((s) => s.id === 'shell')!.tool_name).toBe('shell.exec');
    expect(body.whitelist.map((c) => c.name)).not.toContain('shell.exec');
  });
});

describe('checkAssembly', () => {
  it('accepts the reference assembly', () => expect(() => checkAssembly(assembly)).not.toThrow());

  it.each([
    ['a cycle', { steps: [{ id: 'a', tool_name: 'portfolio.read', dependencies: ['b'] }, { id: 'b', tool_name: 'portfolio.read', dependencies: ['a'] }] }, /cycle/],
    ['an unknown dependency', { steps: [{ id: 'a', tool_name: 'portfolio.read', dependencies: ['ghost'] }] }, /unknown step ghost/],
    ['a repeated id', { steps: [{ id: 'a', tool_name: 'portfolio.read' }, { id: 'a', tool_name: 'portfolio.read' }] }, /repeated/],
    ['an undeclared capability', { steps: [{ id: 'a', tool_name: 'shell.exec' }] }, /does not declare/],
    ['a bad version', { version: 'v2' }, /MAJOR.MINOR.PATCH/],
  ])('refuses %s', (_name, patch, message) => {
    expect(() => checkAssembly({ ...assembly, ...patch } as AssemblyDef)).toThrow(AssemblyError);
    expect(() => checkAssembly({ ...assembly, ...patch } as AssemblyDef)).toThrow(message);
  });

  it('orders steps so every dependency comes first', () => {
    const order = topoOrder(assembly.steps.map((s) => ({ id: s.id, dependencies: s.dependencies ?? [] })));
    for (const s of assembly.steps) for (const d of s.dependencies ?? []) expect(order.indexOf(d)).toBeLessThan(order.indexOf(s.id));
  });
});

describe('canonicalJson', () => {
  it('sorts keys at every level and drops undefined', () => {
    expect(canonicalJson({ b: 1, a: { d: [{ z: 1, y: 2 }], c: undefined } })).toBe('{"a":{"d":[{"y":2,"z":1}]},"b":1}');
  });
});

describe('stepsToReset', () => {
  const steps = [
    { id: 'a', dependencies: [] },
    { id: 'b', dependencies: ['a'] },
    { id: 'c', dependencies: ['b'] },
    { id: 'd', dependencies: [] },
  ];
  it('puts back every step on a GLOBAL replan, the failed subtree on a LOCAL one', async () => {
    const { stepsToReset } = await import('../../src/decision/planner.js');
    expect(stepsToReset('GLOBAL', steps, null, [])).toEqual(['a', 'b', 'c', 'd']);
    expect(stepsToReset('LOCAL', steps, 'b', []).sort()).toEqual(['b', 'c']);
    expect(stepsToReset('LOCAL', steps, null, ['d', 'b']).sort()).toEqual(['b', 'c', 'd']);
  });
});
