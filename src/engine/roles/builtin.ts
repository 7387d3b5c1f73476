// The deterministic built-in agents, one per seed 002 role. They read (the
// contract registry, the decision plane, memory, the tool registry) and answer;
// none of them writes.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ContractLookup } from '../../ports/contracts.js';
import type { Decision } from '../../decision/decision.js';
import { AssemblyError, mergeLocal, topoOrder, type PlanBody } from '../../decision/planner.js';
import { settingsOf } from '../../domain/engine-policy.js';
import { structuredError, type AgentOutput, type AgentRole, type GlobalState, type StepContext, type StructuredError } from '../../domain/engine-types.js';
import { schemaProblem } from '../../execution/tool-runner.js';
import type { Memory } from '../../store/memory.js';
import type { Capabilities } from '../pep.js';
import { validAgentOutput, type CognitiveAgent, type EngineContextView, type ExecutorData, type PlannerData } from './agent.js';

export interface BuiltinDeps {
  em: () => EntityManager;
  contracts: ContractLookup;
  decision: Decision;
  memory: Memory;
  capabilities: Capabilities;
}

abstract class Builtin implements CognitiveAgent {
  abstract readonly role: AgentRole;
  get name(): string {
    return `builtin.${this.role.toLowerCase()}`;
  }
  constructor(protected readonly deps: BuiltinDeps) {}
  abstract run(global: GlobalState, context: EngineContextView, step?: StepContext): Promise<AgentOutput>;
  validateOutput(output: AgentOutput): boolean {
    return validAgentOutput(output) && output.role === this.role;
  }
  protected ok(data: unknown, confidence = 1): AgentOutput {
    return { success: true, data, confidence, errors: [], role: this.role };
  }
  protected failed(errors: StructuredError[], data?: unknown): AgentOutput {
    return { success: false, ...(data !== undefined && { data }), confidence: 0, errors, role: this.role };
  }
}

/** The contract, the assembly that will plan it, and what memory says about the intent. */
export class ContextBuilder extends Builtin {
  readonly role = 'CONTEXT_BUILDER' as const;
  async run(g: GlobalState, ctx: EngineContextView): Promise<AgentOutput> {
    const req = ctx.request as { intent: string; contract: { contract_id: string; version: string }; assembly_version?: string };
    if (!(await this.deps.contracts.find(ctx.tenant_id, req.contract.contract_id, req.contract.version))) {
      return this.failed([structuredError('UNKNOWN_CONTRACT', `contract ${req.contract.contract_id}@${req.contract.version} is no longer registered`, { severity: 'CRITICAL', suggested_action: 'HALT', metadata: { category: 'VALIDATION' } })]);
    }
    // Reads that do not depend on each other go together; a sync submission read the hints ahead (Memory.readAhead).
    const [assembly, hints] = await Promise.all([
      this.deps.decision.resolve(ctx.tenant_id, req.intent, req.assembly_version),
      this.deps.memory.intentHints(ctx.tenant_id, req.intent, g.execution_id),
    ]);
    const settings = settingsOf(assembly.engine);
    const avoid = Object.entries(hints.failure_counts).filter(([, n]) => n >= settings.avoid_after_failures).map(([c]) => c).sort();
    return this.ok({ assembly, failure_counts: hints.failure_counts, similar_successes: hints.similar_successes, avoid });
  }
}

/** Compiles the plan through the decision plane; a replan is LOCAL (the failed subtree) or GLOBAL (latest assembly). */
export class Planner extends Builtin {
  readonly role = 'PLANNER' as const;
  async run(_g: GlobalState, ctx: EngineContextView): Promise<AgentOutput> {
    const req = ctx.request as { intent: string; context: Record<string, unknown>; contract?: { contract_id: string; version: string }; input?: Record<string, unknown>; output_spec?: Record<string, unknown> };
    const avoid = new Set(ctx.avoid);
    const input = { intent: req.intent, context: req.context, ...(req.contract && { contract: req.contract }), ...(req.input && { input: req.input }), ...(req.output_spec && { output_spec: req.output_spec }) };
    const current = ctx.current_plan;
    let assembly = ctx.assembly!;
    if (ctx.replan?.scope === 'GLOBAL') assembly = await this.deps.decision.resolve(ctx.tenant_id, req.intent);
    const fresh = await this.deps.decision.compile(assembly, input, avoid, ctx.tenant_id);
    if (ctx.replan?.scope === 'LOCAL' && current && ctx.replan.failed_step_id) {
      const previous = { assembly_id: current.assembly_id, assembly_version: current.assembly_version, goal: fresh.body.goal, steps: current.steps, whitelist: fresh.body.whitelist } as PlanBody;
      return this.ok(mergeLocal(previous, fresh.body, ctx.replan.failed_step_id) satisfies PlannerData);
    }
    return this.ok(fresh satisfies PlannerData);
  }
}

/**
 * PLAN_CHECK: the DAG is acyclic, every capability is served and inside the
 * plan's whitelist (VCS), and every tool's bound input satisfies its schema.
 * A violation a fallback can repair asks for a replan avoiding the culprit.
 */
export class PlanCritic extends Builtin {
  readonly role = 'PLAN_CRITIC' as const;
  async run(_g: GlobalState, ctx: EngineContextView): Promise<AgentOutput> {
    const plan = ctx.current_plan!;
    try {
      topoOrder(plan.steps.map((s) => ({ id: s.id, dependencies: s.dependencies })));
    } catch (error) {
      return this.failed([structuredError('PLAN_CYCLE', (error as AssemblyError).message, { severity: 'CRITICAL', suggested_action: 'HALT', metadata: { category: 'EXECUTION' } })]);
    }
    const whitelist = new Set(plan.whitelist);
    const violations: { step_id: string; capability: string; problem: string; repairable: boolean }[] = [];
    for (const step of plan.steps.filter((s) => !s.skipped)) {
      const repairable = Boolean(step.fallback_tool && step.fallback_tool !== step.tool_name);
      for (const capability of [step.tool_name, ...(step.fallback_tool ? [step.fallback_tool] : [])]) {
        if (!whitelist.has(capability)) violations.push({ step_id: step.id, capability, problem: 'outside the capability whitelist', repairable: false });
      }
      const facts = await this.deps.capabilities.facts(ctx.tenant_id, step.tool_name);
      if (!facts) {
        violations.push({ step_id: step.id, capability: step.tool_name, problem: 'no tool or execution unit serves it', repairable });
        continue;
      }
      const problem = schemaProblem(facts.input_schema ?? null, step.input);
      if (problem) violations.push({ step_id: step.id, capability: step.tool_name, problem: `input does not match the tool's schema: ${problem.message}`, repairable });
    }
    if (!violations.length) return this.ok({ checked_steps: plan.steps.length });
    const outside = violations.filter((v) => v.problem === 'outside the capability whitelist');
    if (outside.length) {
      return this.failed(
        [
          structuredError('CAPABILITY_NOT_WHITELISTED', `capability ${outside.map((v) => v.capability).join(', ')} is not in the plan's capability whitelist`, {
            severity: 'CRITICAL',
            suggested_action: 'HALT',
            metadata: { category: 'COMPLIANCE', violations, capability: outside[0]!.capability, whitelist: [...whitelist].sort() },
          }),
        ],
        { violations },
      );
    }
    const repairable = violations.every((v) => v.repairable);
    return this.failed(
      [
        structuredError('PLAN_CHECK_FAILED', violations.map((v) => `${v.step_id} (${v.capability}): ${v.problem}`).join('; '), {
          severity: repairable ? 'WARNING' : 'CRITICAL',
          suggested_action: repairable ? 'REPLAN' : 'HALT',
          metadata: { category: 'EXECUTION', violations, avoid: [...new Set(violations.map((v) => v.capability))], replan_scope: 'GLOBAL' },
        }),
      ],
      { violations },
    );
  }
}

/** Binds a step to its call: the planned capability and its bound input. */
export class StepExecutor extends Builtin {
  readonly role = 'STEP_EXECUTOR' as const;
  async run(_g: GlobalState, ctx: EngineContextView, step?: StepContext): Promise<AgentOutput> {
    const planned = ctx.current_plan!.steps.find((s) => s.id === step!.step_id)!;
    return this.ok({ capability: planned.tool_name, input: planned.input } satisfies ExecutorData);
  }
}

/**
 * STEP_REVIEW: a step's output against its output schema (the plan's, else the
 * tool's). GLOBAL_REVIEW (no step): the aggregate against the contract's
 * result schema.
 */
export class Reviewer extends Builtin {
  readonly role = 'REVIEWER' as const;
  async run(_g: GlobalState, ctx: EngineContextView, step?: StepContext): Promise<AgentOutput> {
    if (!step) {
      const req = ctx.request as { contract: { contract_id: string; version: string } };
      const contract = (await this.deps.contracts.find(ctx.tenant_id, req.contract.contract_id, req.contract.version))!;
      const check = this.deps.contracts.validateResponse(contract, 'result', ctx.result_candidate);
      if (check.ok) return this.ok({ valid: true });
      return this.failed([
        structuredError('RESULT_SCHEMA_VIOLATION', 'the result did not satisfy the contract result schema', { severity: 'CRITICAL', suggested_action: 'HALT', metadata: { category: 'INTERNAL', violations: check.violations.slice(0, 5) } }),
      ]);
    }
    const planned = ctx.current_plan!.steps.find((s) => s.id === step.step_id)!;
    const schema = planned.output_schema ?? (await this.deps.capabilities.facts(ctx.tenant_id, planned.tool_name))?.output_schema ?? null;
    const problem = schemaProblem(schema, step.tool_output);
    if (!problem) return this.ok({ valid: true });
    return this.failed([
      structuredError('OUTPUT_SCHEMA_VIOLATION', `${step.step_id} returned output that breaks its schema: ${problem.message}`, {
        suggested_action: 'REPLAN',
        metadata: { category: 'EXECUTION', step_id: step.step_id, capability: planned.tool_name, field: problem.field },
      }),
    ]);
  }
}

export const builtinAgents = (deps: BuiltinDeps): Record<AgentRole, CognitiveAgent> => ({
  CONTEXT_BUILDER: new ContextBuilder(deps),
  PLANNER: new Planner(deps),
  PLAN_CRITIC: new PlanCritic(deps),
  STEP_EXECUTOR: new StepExecutor(deps),
  REVIEWER: new Reviewer(deps),
});
