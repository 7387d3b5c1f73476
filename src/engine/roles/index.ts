// Runs a role: the built-in always runs first (its checks are hard gates an
// LLM cannot talk its way past); a configured LLM or agent then judges or
// refines. Judging roles (PLAN_CRITIC, REVIEWER) must both pass; producing
// roles take the external data only when it has the role's shape.
import type { Secrets } from '../../access/secrets.js';
import { Ajv } from 'ajv';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { RoleBinding } from '../../domain/engine-policy.js';
import { structuredError, type AgentOutput, type AgentRole, type GlobalState, type StepContext } from '../../domain/engine-types.js';
import type { TenantLlm } from '../../ports/pack.js';
import type { PlannedStep } from '../../decision/planner.js';
import { canonicalHash } from '../../domain/hash.js';
import type { CognitiveAgent, EngineContextView, PlannerData } from './agent.js';
import { LlmAgent, RemoteAgent } from './external.js';

const ajv = new Ajv({ strict: false });
/** The data an external producing role may hand back in place of the built-in's. */
const DATA_SHAPES: Partial<Record<AgentRole, ReturnType<typeof ajv.compile>>> = {
  CONTEXT_BUILDER: ajv.compile({ type: 'object', properties: { avoid: { type: 'array', items: { type: 'string' } } } }),
  PLANNER: ajv.compile({
    type: 'object',
    required: ['steps'],
    properties: { steps: { type: 'array', minItems: 1, items: { type: 'object', required: ['id', 'tool_name', 'dependencies'], properties: { id: { type: 'string' }, tool_name: { type: 'string' }, dependencies: { type: 'array', items: { type: 'string' } } } } } },
  }),
  STEP_EXECUTOR: ajv.compile({ type: 'object', required: ['capability', 'input'], properties: { capability: { type: 'string' }, input: { type: 'object' } } }),
};

const JUDGES = new Set<AgentRole>(['PLAN_CRITIC', 'REVIEWER']);

export interface RoleRun {
  output: AgentOutput;
  /** Who answered: the built-in, or the built-in then an external agent. */
  agents: string[];
  /** The LLM calls an LLM-backed role made, as the proxy recorded them. */
  llm_calls?: Record<string, unknown>[];
}

export class Roles {
  constructor(
    readonly builtins: Record<AgentRole, CognitiveAgent>,
    readonly deps: { em: () => EntityManager; llm?: TenantLlm; agentIdleTimeoutMs: number; secrets: Secrets },
  ) {}

  /** Whether a binding puts an outside agent after the built-in (an LLM binding without a router does not). */
  bound(binding: RoleBinding | undefined): boolean {
    return binding !== undefined && (binding.kind === 'agent' || (binding.kind === 'llm' && Boolean(this.deps.llm)));
  }

  /** The external agent bound to a role, if any. */
  external(role: AgentRole, binding: RoleBinding | undefined, tenantId: string, onLlmCall?: (record: Record<string, unknown>) => void): CognitiveAgent | undefined {
    if (binding?.kind === 'agent') return new RemoteAgent(role, tenantId, binding.agent_id, this.deps.em, this.deps.agentIdleTimeoutMs, this.deps.secrets);
    if (binding?.kind !== 'llm' || !this.deps.llm) return undefined;
    return new LlmAgent(role, this.deps.llm.forTenant(tenantId), binding.model ?? this.deps.llm.model, binding.instructions, onLlmCall);
  }

  /** Runs `role` for a ticket of `tenantId`, whose agents it may call. */
  async run(role: AgentRole, binding: RoleBinding | undefined, global: GlobalState, context: EngineContextView, step: StepContext | undefined, tenantId: string): Promise<RoleRun> {
    const builtin = this.builtins[role];
    const base = await builtin.run(global, context, step);
    const llmCalls: Record<string, unknown>[] = [];
    const external = this.external(role, binding, tenantId, (r) => llmCalls.push(r));
    if (!external || !base.success) return { output: base, agents: [builtin.name] };
    let answer: AgentOutput;
    try {
      answer = await external.run(global, { ...context, proposal: base.data }, step);
      if (!external.validateOutput(answer)) throw new Error('not an AgentOutput of its role');
    } catch (error) {
      const e = structuredError('ROLE_AGENT_FAILED', `${external.name} (${role}) failed: ${(error as Error).message}`, { retryable: true, suggested_action: 'RETRY', metadata: { category: 'EXECUTION', role } });
      return { output: { success: false, confidence: 0, errors: [e], role }, agents: [builtin.name, external.name], llm_calls: llmCalls };
    }
    const agents = [builtin.name, external.name];
    if (JUDGES.has(role)) {
      return { output: { success: answer.success, data: base.data, confidence: Math.min(base.confidence, answer.confidence), errors: answer.errors, role }, agents, llm_calls: llmCalls };
    }
    const shaped = answer.data !== undefined && DATA_SHAPES[role]?.(answer.data) === true;
    return { output: { ...answer, data: shaped ? merge(role, base.data, answer.data) : base.data }, agents, llm_calls: llmCalls };
  }
}

/** A producing role's external data over the built-in's. */
function merge(role: AgentRole, base: unknown, data: unknown): unknown {
  if (role === 'CONTEXT_BUILDER') {
    const b = base as { avoid: string[] };
    return { ...b, avoid: [...new Set([...b.avoid, ...((data as { avoid?: string[] }).avoid ?? [])])].sort() };
  }
  if (role === 'PLANNER') {
    // An external planner's steps over the compiled proposal: what it leaves out of a step comes from the proposal.
    const proposal = (base as PlannerData).body;
    const byId = new Map(proposal.steps.map((s) => [s.id, s]));
    const steps = (data as { steps: (Partial<PlannedStep> & { id: string; tool_name: string; dependencies: string[] })[] }).steps.map(
      (s): PlannedStep => ({ ...(byId.get(s.id) ?? { label: s.id, description: '', input: {}, timeout_ms: 30_000, skipped: false }), ...s }) as PlannedStep,
    );
    const body = { ...proposal, steps };
    return { body, hash: canonicalHash(body) } satisfies PlannerData;
  }
  return data;
}
