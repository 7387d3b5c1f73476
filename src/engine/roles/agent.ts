// The cognitive agent contract (seed 002 BaseAgent). An agent thinks and
// evaluates; it reads frozen state and answers an AgentOutput. It never writes
// state, never calls a tool, and never decides the flow.
import { Ajv } from 'ajv';
import type { AssemblyDef, PlanBody, PlannedStep } from '../../decision/planner.js';
import type { StepState } from '../../domain/contract-lifecycle.machine.js';
import type { AgentOutput, AgentRole, GlobalState, Scope, StepContext } from '../../domain/engine-types.js';

/** Seed 002's ExecutionContext, as agents read it (frozen). */
export interface ExecutionContextView {
  readonly current_plan: { plan_id: string; plan_hash: string; assembly_id: string; assembly_version: string; steps: PlannedStep[]; whitelist: string[] } | null;
  readonly active_steps: Readonly<Record<string, StepState>>;
  readonly current_batch_id: string | null;
  readonly replan_scope: Scope | null;
  readonly intermediate_results: Readonly<Record<string, unknown>>;
  readonly errors: readonly string[];
  readonly snapshot_id: string | null;
}

/** What an agent may read besides the seed's ExecutionContext fields. */
export interface EngineContextView extends ExecutionContextView {
  /** The ticket's tenant: memory and agents are looked up in it. */
  readonly tenant_id: string;
  readonly request: Readonly<Record<string, unknown>>;
  readonly assembly: AssemblyDef | null;
  /** Capabilities the planner should replace by their fallbacks. */
  readonly avoid: readonly string[];
  readonly replan: { scope: Scope; failed_step_id: string | null } | null;
  /** Memory consulted by the context builder. */
  readonly memory_hints: { failure_counts: Record<string, number>; similar_successes: unknown[] } | null;
  readonly human_feedback: readonly { action: string; feedback: string; at: string }[];
  /** A candidate from the built-in of this role, for an LLM or agent to judge or refine. */
  readonly proposal?: unknown;
  /** GLOBAL_REVIEW: the aggregate to review. */
  readonly result_candidate?: unknown;
}

export interface CognitiveAgent {
  readonly name: string;
  readonly role: AgentRole;
  run(global: GlobalState, context: EngineContextView, step?: StepContext): Promise<AgentOutput>;
  validateOutput(output: AgentOutput): boolean;
}

/** The shape every AgentOutput has, whoever produced it. */
const AGENT_OUTPUT_SCHEMA = {
  type: 'object',
  required: ['success', 'confidence'],
  properties: {
    success: { type: 'boolean' },
    data: {},
    confidence: { type: 'number', minimum: 0, maximum: 1 },
    errors: {
      type: 'array',
      items: {
        type: 'object',
        required: ['code', 'message'],
        properties: {
          code: { type: 'string' },
          message: { type: 'string' },
          severity: { enum: ['INFO', 'WARNING', 'CRITICAL'] },
          retryable: { type: 'boolean' },
          suggested_action: { enum: ['RETRY', 'REPLAN', 'ROLLBACK', 'HALT'] },
          metadata: { type: 'object' },
        },
      },
    },
  },
} as const;

export const validAgentOutput = new Ajv({ strict: false }).compile(AGENT_OUTPUT_SCHEMA);

/** Normalises an external answer into an AgentOutput of `role`, or undefined if it is not one. */
export function asAgentOutput(value: unknown, role: AgentRole): AgentOutput | undefined {
  if (!validAgentOutput(value)) return undefined;
  const v = value as unknown as AgentOutput;
  return {
    success: v.success,
    ...(v.data !== undefined && { data: v.data }),
    confidence: v.confidence,
    errors: (v.errors ?? []).map((e) => ({ code: e.code, message: e.message, severity: e.severity ?? 'WARNING', retryable: e.retryable ?? false, ...(e.suggested_action && { suggested_action: e.suggested_action }), metadata: e.metadata ?? {} })),
    role,
  };
}

/** A planner's data: a plan body (and, for a replan, the plan it replaces). */
export interface PlannerData {
  body: PlanBody;
  hash: string;
}

/** The executor's data: what to call, with what. */
export interface ExecutorData {
  capability: string;
  input: Record<string, unknown>;
}
