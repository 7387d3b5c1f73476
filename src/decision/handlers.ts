// DecisionService over gRPC: assemblies and frozen plans in their proto shapes.
import type { Assembly, Capability, CapabilityKind, DecisionServiceService, FrozenPlan, PlanStep } from '../../gen/abc/decision/v1/decision.js';
import { requireKey } from '../access/principal.js';
import { targetTenant } from '../access/scopes.js';
import { PLATFORM_TENANT } from '../domain/ids.js';
import { invalidRequest } from '../domain/errors.js';
import type { ServiceHandlers } from '../grpc/bind.js';
import { enumOf } from '../grpc/mappers.js';
import type { Decision, FrozenPlanDoc } from './decision.js';
import type { AssemblyDef, CapabilityDef, OutputSpec, PlannedStep, StepDef } from './planner.js';

export function decisionHandlers(decision: Decision): ServiceHandlers<typeof DecisionServiceService> {
  return {
    plan: async (req, ctx) => {
      const { tenantId } = requireKey(ctx.principal);
      if (!req.intent) throw invalidRequest('intent is required', 'intent');
      const plan = await decision.plan({
        tenantId,
        intent: req.intent,
        ...(req.contract && { contract: { contract_id: req.contract.contractId, version: req.contract.version } }),
        context: req.context ?? {},
        ...(req.input && { input: req.input }),
        ...(req.outputSpec && { output_spec: req.outputSpec }),
        ...(req.executionId && { executionId: req.executionId }),
        ...(req.assemblyVersion && { assemblyVersion: req.assemblyVersion }),
      });
      return { plan: toFrozenPlan(plan) };
    },
    replan: async (req, ctx) => {
      const { tenantId } = requireKey(ctx.principal);
      if (!req.planId) throw invalidRequest('plan_id is required', 'plan_id');
      const scope = req.scope === 'REPLAN_SCOPE_GLOBAL' ? 'GLOBAL' : 'LOCAL';
      const reason = req.error ? { code: req.error.code, message: req.error.message } : undefined;
      return { plan: toFrozenPlan(await decision.replan(req.planId, scope, req.failedStepId, reason, tenantId)) };
    },
    listAssemblies: async (req, ctx) => {
      const { tenantId } = requireKey(ctx.principal);
      return { assemblies: (await decision.list(tenantId, req.intent || undefined)).map((a) => toAssembly(a.assembly, a.platform)) };
    },
    registerAssembly: async (req, ctx) => {
      const tenantId = targetTenant(requireKey(ctx.principal), req.platform);
      if (!req.assembly) throw invalidRequest('assembly is required', 'assembly');
      return { assembly: toAssembly(await decision.register(tenantId, fromAssembly(req.assembly)), tenantId === PLATFORM_TENANT) };
    },
  };
}

const toCapability = (c: CapabilityDef): Capability => ({ name: c.name, kind: enumOf<CapabilityKind>('CAPABILITY_KIND', c.kind), constraints: c.constraints });
const fromCapability = (c: Capability): CapabilityDef => ({
  name: c.name,
  kind: (c.kind.replace(/^CAPABILITY_KIND_/, '') || 'TOOL') as CapabilityDef['kind'],
  ...(c.constraints && { constraints: c.constraints }),
});

const blankStep = { description: '', toolName: '', expectedOutput: '', dependencies: [], label: '', skipped: false, skipReason: '', fallbackTool: '' };

function toPlanStep(s: PlannedStep): PlanStep {
  return {
    ...blankStep,
    id: s.id,
    label: s.label,
    description: s.description,
    toolName: s.tool_name,
    fallbackTool: s.fallback_tool ?? '',
    input: s.input,
    dependencies: s.dependencies,
    timeoutMs: s.timeout_ms,
    outputSchema: s.output_schema,
    skipped: s.skipped,
    skipReason: s.skip_reason ?? '',
  };
}

function toStepDef(s: StepDef): PlanStep {
  return {
    ...blankStep,
    id: s.id,
    label: s.label ?? '',
    description: s.description ?? '',
    toolName: s.tool_name,
    fallbackTool: s.fallback_tool ?? '',
    input: s.input,
    dependencies: s.dependencies ?? [],
    timeoutMs: s.timeout_ms,
    expectedOutput: s.expected_output ?? '',
    outputSchema: s.output_schema,
    when: s.when && { path: s.when.path, defaultValue: s.when.default_value ?? false },
  };
}

function fromStepDef(s: PlanStep): StepDef {
  return {
    id: s.id,
    ...(s.label && { label: s.label }),
    ...(s.description && { description: s.description }),
    tool_name: s.toolName,
    ...(s.fallbackTool && { fallback_tool: s.fallbackTool }),
    ...(s.input && { input: s.input }),
    dependencies: s.dependencies,
    ...(s.timeoutMs !== undefined && { timeout_ms: s.timeoutMs }),
    ...(s.expectedOutput && { expected_output: s.expectedOutput }),
    ...(s.outputSchema && { output_schema: s.outputSchema }),
    ...(s.when && { when: { path: s.when.path, default_value: s.when.defaultValue } }),
  };
}

export function toAssembly(a: AssemblyDef, platform: boolean): Assembly {
  return {
    assemblyId: a.assembly_id,
    version: a.version,
    intent: a.intent,
    contract: a.contract && { contractId: a.contract.contract_id, version: a.contract.version },
    description: a.description ?? '',
    steps: a.steps.map(toStepDef),
    capabilities: a.capabilities.map(toCapability),
    expectedLatencyMs: a.expected_latency_ms ?? 0,
    engine: a.engine,
    output: a.output as Record<string, unknown> | undefined,
    platform,
  };
}

function fromAssembly(a: Assembly): AssemblyDef {
  return {
    assembly_id: a.assemblyId,
    version: a.version,
    intent: a.intent,
    ...(a.contract && { contract: { contract_id: a.contract.contractId, version: a.contract.version } }),
    ...(a.description && { description: a.description }),
    expected_latency_ms: a.expectedLatencyMs,
    capabilities: a.capabilities.map(fromCapability),
    steps: a.steps.map(fromStepDef),
    ...(a.engine && { engine: a.engine }),
    ...(a.output && { output: a.output as unknown as OutputSpec }),
  };
}

function toFrozenPlan(p: FrozenPlanDoc): FrozenPlan {
  return {
    planId: p.plan_id,
    assemblyId: p.assembly_id,
    assemblyVersion: p.assembly_version,
    goal: p.goal,
    steps: p.steps.map(toPlanStep),
    whitelist: p.whitelist.map(toCapability),
    planHash: p.plan_hash,
    createdAt: p.created_at,
    metadata: p.metadata,
    replacesPlanId: p.replaces_plan_id ?? '',
  };
}
