// Seed 002's policy for contract executions, pure: evaluate_transition limits
// the self-healing loop and weighs risk; check_tool_permission is role × tool.
// Settings come from the assembly's `engine` section over ABC's defaults, so a
// new assembly version changes policy without a restart.
import type { PermissionLevel } from './policy.js';
import { AGENT_ROLES, RISK_LEVELS, type AgentRole, type GlobalState, type PolicyDecision, type RiskLevel, type Scope, type StructuredError, type ToolFacts } from './engine-types.js';

/** How a role is filled: the built-in, an LLM through ABC's proxy, or a registered agent. */
export type RoleBinding = { kind: 'builtin' } | { kind: 'llm'; model?: string; instructions?: string } | { kind: 'agent'; agent_id: string };

export interface EngineSettings {
  /** Halt after this many failed reviews in a row. */
  max_consecutive_failures: number;
  /** Halt after this many self-healing iterations (retries, replans, rollbacks). */
  max_iterations: number;
  /** Retries of one step before the policy escalates to a replan. */
  max_step_retries: number;
  /** A reviewer's confidence below this is a failed review. */
  confidence_threshold: number;
  low_confidence_action: 'REPLAN' | 'WAIT_HUMAN';
  /** Steps at or above this risk wait for a human before they run. */
  human_approval_risk: RiskLevel;
  human_timeout_ms: number;
  /** Steps of one execution running at once. */
  max_active_steps: number;
  /** The planner avoids a capability with this many recorded failures when a fallback exists. */
  avoid_after_failures: number;
  role_permissions: Record<AgentRole, PermissionLevel[]>;
  roles: Partial<Record<AgentRole, RoleBinding>>;
}

export const DEFAULT_SETTINGS: EngineSettings = {
  max_consecutive_failures: 3,
  max_iterations: 10,
  max_step_retries: 2,
  confidence_threshold: 0.6,
  low_confidence_action: 'WAIT_HUMAN',
  human_approval_risk: 'CRITICAL',
  human_timeout_ms: 3_600_000,
  max_active_steps: 4,
  avoid_after_failures: 3,
  // Only the executor touches tools; thinking roles read state.
  role_permissions: { CONTEXT_BUILDER: [], PLANNER: [], PLAN_CRITIC: [], STEP_EXECUTOR: ['PUBLIC', 'INTERNAL', 'ADMIN'], REVIEWER: [] },
  roles: {},
};

/** The JSON Schema of an assembly's `engine` section. */
export const ENGINE_SETTINGS_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    max_consecutive_failures: { type: 'integer', minimum: 1, maximum: 100 },
    max_iterations: { type: 'integer', minimum: 1, maximum: 1000 },
    max_step_retries: { type: 'integer', minimum: 0, maximum: 20 },
    confidence_threshold: { type: 'number', minimum: 0, maximum: 1 },
    low_confidence_action: { enum: ['REPLAN', 'WAIT_HUMAN'] },
    human_approval_risk: { enum: [...RISK_LEVELS] },
    human_timeout_ms: { type: 'integer', minimum: 1, maximum: 30 * 86_400_000 },
    max_active_steps: { type: 'integer', minimum: 1, maximum: 64 },
    avoid_after_failures: { type: 'integer', minimum: 1 },
    role_permissions: {
      type: 'object',
      additionalProperties: false,
      properties: Object.fromEntries(AGENT_ROLES.map((r) => [r, { type: 'array', items: { enum: ['PUBLIC', 'INTERNAL', 'ADMIN'] }, uniqueItems: true }])),
    },
    roles: {
      type: 'object',
      additionalProperties: false,
      properties: Object.fromEntries(
        AGENT_ROLES.map((r) => [
          r,
          {
            oneOf: [
              { type: 'object', additionalProperties: false, required: ['kind'], properties: { kind: { const: 'builtin' } } },
              { type: 'object', additionalProperties: false, required: ['kind'], properties: { kind: { const: 'llm' }, model: { type: 'string', minLength: 1 }, instructions: { type: 'string' } } },
              { type: 'object', additionalProperties: false, required: ['kind', 'agent_id'], properties: { kind: { const: 'agent' }, agent_id: { type: 'string', minLength: 1 } } },
            ],
          },
        ]),
      ),
    },
  },
} as const;

export function settingsOf(section: Partial<EngineSettings> | undefined, defaults: Partial<EngineSettings> = {}): EngineSettings {
  const base = { ...DEFAULT_SETTINGS, ...defaults };
  return { ...base, ...section, role_permissions: { ...base.role_permissions, ...section?.role_permissions }, roles: { ...base.roles, ...section?.roles } };
}

/** The counters the policy reads; the engine keeps them in the execution record. */
export interface LoopCounters {
  consecutive_failures: number;
  attempts: Readonly<Record<string, number>>;
  local_replans: Readonly<Record<string, number>>;
  approved_steps: readonly string[];
}

export type TransitionInput =
  | { kind: 'step_start'; step_id: string; tool: ToolFacts }
  | { kind: 'failure'; step_id: string | null; error: StructuredError }
  | { kind: 'low_confidence'; step_id: string | null; confidence: number };

const rank = (r: RiskLevel) => RISK_LEVELS.indexOf(r);

/** ADMIN tools are critical, tools with side effects high, INTERNAL ones medium. */
export function riskOf(tool: ToolFacts): RiskLevel {
  if (tool.permission_level === 'ADMIN') return 'CRITICAL';
  if (tool.side_effect) return 'HIGH';
  return tool.permission_level === 'INTERNAL' ? 'MEDIUM' : 'LOW';
}

export function checkToolPermission(role: AgentRole, tool: ToolFacts, settings: EngineSettings): boolean {
  return settings.role_permissions[role].includes(tool.permission_level);
}

/**
 * Whether the engine may go on, and where to. A failure is retried while the
 * step has retries left, then replanned LOCAL once, then GLOBAL; an error's
 * own suggested_action and scope take precedence. Every path halts after
 * max_consecutive_failures failures in a row or max_iterations iterations.
 */
export function evaluateTransition(g: GlobalState, counters: LoopCounters, s: EngineSettings, input: TransitionInput): PolicyDecision {
  const decision = (d: Partial<PolicyDecision> & Pick<PolicyDecision, 'allow'>): PolicyDecision => ({ risk_level: 'LOW', require_human_approval: false, blocked_tools: [], ...d });
  if (input.kind === 'step_start') {
    const risk = riskOf(input.tool);
    if (rank(risk) >= rank(s.human_approval_risk) && !counters.approved_steps.includes(input.step_id)) {
      return decision({ allow: false, risk_level: risk, require_human_approval: true, next_state: 'WAIT_HUMAN', action: 'WAIT_HUMAN', reason: `${input.tool.name} is ${risk} risk (human approval from ${s.human_approval_risk})` });
    }
    return decision({ allow: true, risk_level: risk, action: 'CONTINUE' });
  }
  const failures = counters.consecutive_failures + 1;
  const halt = (reason: string) => decision({ allow: false, risk_level: 'HIGH', next_state: 'FAILED', action: 'HALT', reason });
  if (failures >= s.max_consecutive_failures) return halt(`${failures} consecutive failures reached the limit of ${s.max_consecutive_failures}`);
  if (g.iteration_count >= s.max_iterations) return halt(`${g.iteration_count} self-healing iterations reached the limit of ${s.max_iterations}`);
  const step = input.step_id;
  if (input.kind === 'low_confidence') {
    const reason = `confidence ${input.confidence} is below ${s.confidence_threshold}`;
    if (s.low_confidence_action === 'WAIT_HUMAN') return decision({ allow: true, risk_level: 'MEDIUM', require_human_approval: true, next_state: 'WAIT_HUMAN', action: 'WAIT_HUMAN', reason });
    return replan(step, undefined, reason);
  }
  const e = input.error;
  let action = e.suggested_action ?? (e.retryable ? 'RETRY' : 'REPLAN');
  if (action === 'RETRY' && step && (counters.attempts[step] ?? 0) >= s.max_step_retries) action = 'REPLAN';
  switch (action) {
    case 'RETRY':
      return decision({ allow: true, risk_level: 'MEDIUM', next_state: 'STEP_EXECUTION', action, reason: `${e.code} is retryable` });
    case 'REPLAN':
      return replan(step, e.metadata.replan_scope as Scope | undefined, `${e.code}: replanning`);
    case 'ROLLBACK': {
      const scope = e.metadata.rollback_scope === 'GLOBAL' ? 'GLOBAL' : 'LOCAL';
      return decision({ allow: true, risk_level: 'HIGH', next_state: 'ROLLBACK', action, scope, reason: `${e.code}: rolling back (${scope})` });
    }
    default:
      return halt(`${e.code}: ${e.message}`);
  }

  function replan(stepId: string | null, asked: Scope | undefined, reason: string): PolicyDecision {
    const scope = asked === 'LOCAL' || asked === 'GLOBAL' ? asked : stepId && (counters.local_replans[stepId] ?? 0) === 0 ? 'LOCAL' : 'GLOBAL';
    return decision({ allow: true, risk_level: 'MEDIUM', next_state: 'REPLAN', action: 'REPLAN', scope, reason: `${reason} (${scope})` });
  }
}
