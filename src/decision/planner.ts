// The decision plane's compiler: intent + context + an assembly version → a
// frozen plan with its capability whitelist (VCS) and plan_hash. Pure: the same
// input and assembly version always give the same plan and hash.
import { canonicalHash } from '../domain/hash.js';
import { goalOf } from '../domain/goal.js';
import { getPointer, parsePointer } from '../domain/pointer.js';
import { parseTemplate } from '../domain/template.js';

export interface CapabilityDef {
  name: string;
  kind: 'TOOL' | 'LLM' | 'AGENT' | 'DATA_SOURCE';
  constraints?: Record<string, unknown>;
}

export interface StepDef {
  id: string;
  label?: string;
  description?: string;
  tool_name: string;
  fallback_tool?: string;
  /** Values or `$.path` references into the plan input. */
  input?: Record<string, unknown>;
  dependencies?: string[];
  timeout_ms?: number;
  expected_output?: string;
  /** The step's output must satisfy this (STEP_REVIEW). */
  output_schema?: Record<string, unknown>;
  when?: { path: string; default_value?: boolean };
}

export interface AssemblyDef {
  assembly_id: string;
  version: string;
  intent: string;
  contract?: { contract_id: string; version: string };
  description?: string;
  expected_latency_ms?: number;
  capabilities: CapabilityDef[];
  steps: StepDef[];
  /** Seed 002 engine policy and role bindings for executions of this assembly (engine/policy.ts). */
  engine?: Record<string, unknown>;
  /** How the result is built when no pack owns the assembly (engine/outputs.ts). */
  output?: OutputSpec;
}

/**
 * A declarative output. Each key is a JSON pointer into the result; each value
 * a source: `/<step_id>/…` (a pointer into step outputs) or `$request/…` (into
 * the request). `markdown` is a template (domain/template.ts) over the result,
 * used when the request asks `output_spec.format: markdown`.
 */
export interface OutputSpec {
  result: Record<string, string>;
  partial?: Record<string, string>;
  markdown?: string;
}

export interface PlanInput {
  intent: string;
  contract?: { contract_id: string; version: string };
  context: Record<string, unknown>;
  input?: Record<string, unknown>;
  output_spec?: Record<string, unknown>;
}

export interface PlannedStep {
  id: string;
  label: string;
  description: string;
  tool_name: string;
  /** A granted capability that takes over if `tool_name` fails (the deterministic path of an LLM step). */
  fallback_tool?: string;
  input: Record<string, unknown>;
  dependencies: string[];
  timeout_ms: number;
  output_schema?: Record<string, unknown>;
  skipped: boolean;
  skip_reason?: string;
  /** Set when the planner chose the fallback because the primary capability is avoided. */
  avoided?: string;
}

export interface PlanBody {
  assembly_id: string;
  assembly_version: string;
  goal: string;
  steps: PlannedStep[];
  whitelist: CapabilityDef[];
}

export class AssemblyError extends Error {
  constructor(message: string, readonly pointer: string) {
    super(message);
    this.name = 'AssemblyError';
  }
}

const DEFAULT_STEP_TIMEOUT_MS = 30_000;

/** Checks an assembly is well formed: unique step ids, known dependencies, no cycle, declared capabilities. */
export function checkAssembly(a: AssemblyDef): void {
  if (!a.assembly_id || !a.version || !a.intent) throw new AssemblyError('assembly_id, version and intent are required', '/assembly');
  if (!/^\d+\.\d+\.\d+$/.test(a.version)) throw new AssemblyError(`version ${a.version} is not MAJOR.MINOR.PATCH`, '/assembly/version');
  const declared = new Set(a.capabilities.map((c) => c.name));
  const ids = new Set<string>();
  a.steps.forEach((s, i) => {
    if (!s.id || ids.has(s.id)) throw new AssemblyError(`step id ${JSON.stringify(s.id)} is missing or repeated`, `/assembly/steps/${i}/id`);
    ids.add(s.id);
    for (const cap of [s.tool_name, s.fallback_tool].filter(Boolean) as string[]) {
      if (!declared.has(cap)) throw new AssemblyError(`step ${s.id} uses capability ${cap}, which the assembly does not declare`, `/assembly/steps/${i}/tool_name`);
    }
  });
  a.steps.forEach((s, i) =>
    (s.dependencies ?? []).forEach((d, j) => {
      if (!ids.has(d)) throw new AssemblyError(`step ${s.id} depends on unknown step ${d}`, `/assembly/steps/${i}/dependencies/${j}`);
    }),
  );
  topoOrder(a.steps.map((s) => ({ id: s.id, dependencies: s.dependencies ?? [] })));
  a.steps.forEach((s, i) => {
    const before = ancestors(a.steps, s.id);
    for (const ref of stepRefs(s.input ?? {})) {
      const from = parsePointer(ref.slice(STEP_REF.length))[0];
      if (!from || !before.has(from)) throw new AssemblyError(`step ${s.id} reads ${ref}, but ${from} is not one of its dependencies`, `/assembly/steps/${i}/input`);
    }
  });
  if (a.output) checkOutput(a.output, ids);
}

function checkOutput(o: OutputSpec, ids: Set<string>): void {
  if (!o.result || typeof o.result !== 'object') throw new AssemblyError('output.result must map result pointers to sources', '/assembly/output/result');
  for (const part of ['result', 'partial'] as const) {
    for (const [target, source] of Object.entries(o[part] ?? {})) {
      const at = `/assembly/output/${part}/${target.replace(/~/g, '~0').replace(/\//g, '~1')}`;
      try {
        if (!parsePointer(target).length) throw new Error('the whole result cannot be one source');
        if (typeof source !== 'string') throw new Error('a source is a string');
        if (source.startsWith(REQUEST_REF)) parsePointer(source.slice(REQUEST_REF.length));
        else if (!ids.has(parsePointer(source)[0] ?? '')) throw new Error(`${source} names no step`);
      } catch (error) {
        throw new AssemblyError(`output.${part} ${target}: ${(error as Error).message}`, at);
      }
    }
  }
  if (o.markdown !== undefined) {
    try {
      parseTemplate(o.markdown);
    } catch (error) {
      throw new AssemblyError(`output.markdown: ${(error as Error).message}`, '/assembly/output/markdown');
    }
  }
}

/** A step input string `$steps/<step_id>/…` reads an ancestor's output when the step runs. */
export const STEP_REF = '$steps';
/** An output source `$request/…` reads the request. */
export const REQUEST_REF = '$request';

function stepRefs(value: unknown): string[] {
  if (typeof value === 'string') return value.startsWith(`${STEP_REF}/`) ? [value] : [];
  if (value && typeof value === 'object') return Object.values(value).flatMap(stepRefs);
  return [];
}

/** Replaces `$steps/<id>/…` strings with those values of the ancestors' outputs; absent values drop the key. */
export const bindStepOutputs = (input: unknown, outputs: Record<string, unknown>): unknown =>
  bindRefs(input, (ref) => (ref.startsWith(`${STEP_REF}/`) ? { value: getPointer(outputs, ref.slice(STEP_REF.length)) } : undefined));

/**
 * Walks a template, replacing each string `resolve` recognises by its value;
 * an undefined value drops the key. Other values are kept as they are.
 */
function bindRefs(template: unknown, resolve: (ref: string) => { value: unknown } | undefined): unknown {
  if (typeof template === 'string') {
    const hit = resolve(template);
    return hit ? hit.value : template;
  }
  if (Array.isArray(template)) return template.map((t) => bindRefs(t, resolve));
  if (template && typeof template === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(template)) {
      const bound = bindRefs(v, resolve);
      if (bound !== undefined) out[k] = bound;
    }
    return out;
  }
  return template;
}

/** Every step `id` depends on, directly or not. */
export function ancestors(steps: readonly { id: string; dependencies?: readonly string[] }[], id: string): Set<string> {
  const byId = new Map(steps.map((s) => [s.id, s]));
  const seen = new Set<string>();
  const visit = (x: string) => {
    for (const d of byId.get(x)?.dependencies ?? []) if (!seen.has(d)) (seen.add(d), visit(d));
  };
  visit(id);
  return seen;
}

/** Kahn's algorithm; throws on a cycle. Returns ids in a stable dependency order. */
export function topoOrder(steps: { id: string; dependencies: string[] }[]): string[] {
  const pending = new Map(steps.map((s) => [s.id, new Set(s.dependencies)]));
  const order: string[] = [];
  while (pending.size) {
    const ready = [...pending].filter(([, deps]) => deps.size === 0).map(([id]) => id);
    if (!ready.length) throw new AssemblyError(`steps ${[...pending.keys()].join(', ')} form a cycle`, '/assembly/steps');
    for (const id of ready) {
      pending.delete(id);
      order.push(id);
      for (const deps of pending.values()) deps.delete(id);
    }
  }
  return order;
}

/**
 * Compiles a plan. The whitelist is the assembly's capabilities that the control
 * plane grants (`granted`); a step whose capability is not granted falls back
 * to its `fallback_tool` when that is granted, and otherwise keeps its
 * capability, so the PEP refuses it at execution with COMPLIANCE.
 */
export function compilePlan(assembly: AssemblyDef, input: PlanInput, granted: ReadonlySet<string>, avoid: ReadonlySet<string> = new Set()): { body: PlanBody; hash: string } {
  const whitelist = assembly.capabilities.filter((c) => granted.has(c.name)).sort((a, b) => a.name.localeCompare(b.name));
  const allowed = new Set(whitelist.map((c) => c.name));
  const doc = { context: input.context, input: input.input ?? {}, output_spec: input.output_spec ?? {} };
  const steps = assembly.steps.map((s): PlannedStep => {
    const condition = s.when ? (lookup(doc, s.when.path) ?? s.when.default_value ?? false) : true;
    const fallback = s.fallback_tool && allowed.has(s.fallback_tool) ? s.fallback_tool : undefined;
    // An avoided capability (it failed before) gives way to its fallback, when there is one.
    const avoided = fallback && allowed.has(s.tool_name) && avoid.has(s.tool_name) ? s.tool_name : undefined;
    const tool = (!allowed.has(s.tool_name) || avoided) && fallback ? fallback : s.tool_name;
    return {
      id: s.id,
      label: s.label ?? s.id,
      description: s.description ?? '',
      tool_name: tool,
      ...(fallback && fallback !== tool && { fallback_tool: fallback }),
      input: bind(s.input ?? {}, doc) as Record<string, unknown>,
      dependencies: [...(s.dependencies ?? [])],
      timeout_ms: s.timeout_ms ?? DEFAULT_STEP_TIMEOUT_MS,
      ...(s.output_schema && { output_schema: s.output_schema }),
      skipped: condition !== true,
      ...(avoided && { avoided }),
      ...(condition !== true && { skip_reason: `${s.when!.path} is ${JSON.stringify(condition)}` }),
    };
  });
  const body: PlanBody = { assembly_id: assembly.assembly_id, assembly_version: assembly.version, goal: goalOf(input), steps, whitelist };
  return { body, hash: canonicalHash(body) };
}

export { goalOf };

/** The content of a plan, without its identity. */
export const bodyOf = (p: PlanBody): PlanBody => ({ assembly_id: p.assembly_id, assembly_version: p.assembly_version, goal: p.goal, steps: p.steps, whitelist: p.whitelist });

/** A step and every step that depends on it, directly or not. */
export function descendants(steps: { id: string; dependencies: string[] }[], id: string): Set<string> {
  const out = new Set([id]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const s of steps) {
      if (!out.has(s.id) && s.dependencies.some((d) => out.has(d))) {
        out.add(s.id);
        grew = true;
      }
    }
  }
  return out;
}

/** The steps a replan puts back: all of them (GLOBAL), or the failed ones and what depends on them (LOCAL). */
export function stepsToReset(scope: 'LOCAL' | 'GLOBAL', steps: { id: string; dependencies: string[] }[], failedStepId: string | null, failedIds: string[]): string[] {
  if (scope === 'GLOBAL') return steps.map((s) => s.id);
  const roots = [...new Set([...(failedStepId ? [failedStepId] : []), ...failedIds])];
  return [...new Set(roots.flatMap((id) => [...descendants(steps, id)]))];
}

/**
 * A LOCAL replan: the previous plan with only the failed step and its
 * dependants taken from a fresh compile (which may avoid failed capabilities).
 */
export function mergeLocal(previous: PlanBody, fresh: PlanBody, failedStepId: string): { body: PlanBody; hash: string } {
  const subtree = descendants(previous.steps, failedStepId);
  const byId = new Map(fresh.steps.map((s) => [s.id, s]));
  const steps = previous.steps.map((s) => (subtree.has(s.id) && byId.has(s.id) ? byId.get(s.id)! : s));
  const body = { ...bodyOf(previous), steps };
  return { body, hash: canonicalHash(body) };
}

/** Replaces `$.a.b` strings with the value at that path; absent paths drop the key. */
const bind = (template: unknown, doc: Record<string, unknown>): unknown => bindRefs(template, (ref) => (ref.startsWith('$.') ? { value: lookup(doc, ref.slice(2)) } : undefined));

function lookup(doc: unknown, path: string): unknown {
  let cur = doc;
  for (const part of path.split('.')) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}
