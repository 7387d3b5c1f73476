// The policy engine's pure part: rules decide allow, require_approval or block
// for a tool call; the first matching rule wins and its id is recorded. Each
// tenant is under two documents: the platform's, and its own; the stricter
// verdict holds, so a tenant's policy can tighten the platform's but never loosen it.
import { allMatch, CONDITION_SCHEMA, type Condition } from './conditions.js';

export type PolicyDecisionKind = 'allow' | 'require_approval' | 'block';
export type PermissionLevel = 'PUBLIC' | 'INTERNAL' | 'ADMIN';

/** A comparison on one argument, addressed by a dotted path (`amount`, `to.country`). */
export type ArgCondition = Condition;

export interface PolicyRule {
  id: string;
  /**
   * Tool names (and contract step capabilities, `tool.x` or a unit's name) this
   * rule applies to; `*` ends a prefix (`payments.*`) or matches all.
   */
  tools: string[];
  when?: {
    args?: Record<string, ArgCondition>;
    agents?: string[];
    permission_levels?: PermissionLevel[];
    tenants?: string[];
    /** What is asking: an agent's tool call, or a contract's plan step. */
    actions?: PolicyAction[];
  };
  decision: PolicyDecisionKind;
  reason?: string;
}

/** Token budgets; a call is refused once a budget is used up. */
export interface TokenBudgets {
  /** Tokens one run may spend on LLM calls. */
  run_tokens?: number;
  /** Tokens one tenant may spend on LLM calls per UTC day. */
  tenant_tokens_per_day?: number;
}

export interface PolicyDocument {
  version: number;
  rules: PolicyRule[];
  /** When no rule matches. */
  default: PolicyDecisionKind;
  /** Token budgets for every tenant, and per tenant in place of those. */
  budgets?: TokenBudgets & { tenants?: Record<string, TokenBudgets> };
}

/** The budgets that hold for a tenant: its own, else the document's. */
export function budgetsFor(policy: PolicyDocument, tenantId: string): TokenBudgets {
  const b = policy.budgets;
  if (!b) return {};
  return { run_tokens: b.run_tokens, tenant_tokens_per_day: b.tenant_tokens_per_day, ...b.tenants?.[tenantId] };
}

/** What asks: an agent's tool call, a contract's plan step, an LLM call (the model is the name), an agent-to-agent call (the callee is the name). */
export type PolicyAction = 'tool_call' | 'contract_step' | 'llm_call' | 'agent_call';

export interface ToolCallFacts {
  /** The tool's name; for a contract step, its capability (`tool.x` is also matched as `x`). */
  tool: string;
  args: Record<string, unknown>;
  /** The calling agent; empty for a contract step. */
  agentId: string;
  permissionLevel: PermissionLevel;
  tenantId: string;
  action: PolicyAction;
}

export interface PolicyVerdict {
  decision: PolicyDecisionKind;
  /** The matching rule's id, or `default`. */
  ruleId: string;
  reason: string;
  /** The `version` of the policy document that decided. */
  policyVersion: number;
}

/** Whose document decided: the platform's (file or API) or the tenant's own. */
export type PolicyScope = 'platform' | 'tenant';

/** The policies one tenant is under. */
export interface PolicySet {
  platform: PolicyDocument;
  /** The tenant's own policy, stored over the API; none until it stores one. */
  tenant?: PolicyDocument;
}

export interface ScopedVerdict extends PolicyVerdict {
  policyScope: PolicyScope;
}

const SEVERITY: Record<PolicyDecisionKind, number> = { allow: 0, require_approval: 1, block: 2 };

/** Both documents decide; the stricter verdict holds, and on a tie the tenant's (the more specific) is recorded. */
export function decide(set: PolicySet, facts: ToolCallFacts): ScopedVerdict {
  const platform: ScopedVerdict = { ...evaluatePolicy(set.platform, facts), policyScope: 'platform' };
  if (!set.tenant) return platform;
  const own: ScopedVerdict = { ...evaluatePolicy(set.tenant, facts), policyScope: 'tenant' };
  return SEVERITY[platform.decision] > SEVERITY[own.decision] ? platform : own;
}

/** The budgets a tenant is under: each the smaller of the platform's and its own. */
export function budgetsOf(set: PolicySet, tenantId: string): TokenBudgets {
  const platform = budgetsFor(set.platform, tenantId);
  if (!set.tenant) return platform;
  const own = budgetsFor(set.tenant, tenantId);
  const least = (a?: number, b?: number) => (a === undefined ? b : b === undefined ? a : Math.min(a, b));
  return { run_tokens: least(platform.run_tokens, own.run_tokens), tenant_tokens_per_day: least(platform.tenant_tokens_per_day, own.tenant_tokens_per_day) };
}

/** How a decision is recorded: on events, trace entries and in a refusal's details. */
export const verdictRecord = (v: ScopedVerdict) => ({ rule_id: v.ruleId, policy_version: v.policyVersion, policy_scope: v.policyScope });

/** The JSON Schema of a policy document; a document that fails it is refused at load. */
export const POLICY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['version', 'rules', 'default'],
  properties: {
    version: { type: 'integer', minimum: 1, maximum: 2147483647 },
    default: { enum: ['allow', 'require_approval', 'block'] },
    budgets: {
      type: 'object',
      additionalProperties: false,
      properties: {
        run_tokens: { type: 'integer', minimum: 1 },
        tenant_tokens_per_day: { type: 'integer', minimum: 1 },
        tenants: {
          type: 'object',
          additionalProperties: {
            type: 'object',
            additionalProperties: false,
            properties: { run_tokens: { type: 'integer', minimum: 1 }, tenant_tokens_per_day: { type: 'integer', minimum: 1 } },
          },
        },
      },
    },
    rules: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'tools', 'decision'],
        properties: {
          id: { type: 'string', minLength: 1 },
          tools: { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } },
          decision: { enum: ['allow', 'require_approval', 'block'] },
          reason: { type: 'string' },
          when: {
            type: 'object',
            additionalProperties: false,
            properties: {
              agents: { type: 'array', items: { type: 'string' } },
              tenants: { type: 'array', items: { type: 'string' } },
              actions: { type: 'array', items: { enum: ['tool_call', 'contract_step', 'llm_call', 'agent_call'] } },
              permission_levels: { type: 'array', items: { enum: ['PUBLIC', 'INTERNAL', 'ADMIN'] } },
              args: { type: 'object', additionalProperties: CONDITION_SCHEMA },
            },
          },
        },
      },
    },
  },
} as const;

/** Decides a tool call: the first rule whose tools and conditions all match wins. */
export function evaluatePolicy(policy: PolicyDocument, facts: ToolCallFacts): PolicyVerdict {
  const names = facts.action === 'contract_step' && facts.tool.startsWith('tool.') ? [facts.tool, facts.tool.slice(5)] : [facts.tool];
  for (const rule of policy.rules) {
    if (!rule.tools.some((pattern) => names.some((name) => toolMatches(pattern, name)))) continue;
    if (rule.when?.actions && !rule.when.actions.includes(facts.action)) continue;
    if (rule.when?.tenants && !rule.when.tenants.includes(facts.tenantId)) continue;
    if (rule.when?.agents && !rule.when.agents.includes(facts.agentId)) continue;
    if (rule.when?.permission_levels && !rule.when.permission_levels.includes(facts.permissionLevel)) continue;
    if (rule.when?.args && !allMatch(facts.args, rule.when.args)) continue;
    return { decision: rule.decision, ruleId: rule.id, reason: rule.reason ?? `rule ${rule.id}`, policyVersion: policy.version };
  }
  return { decision: policy.default, ruleId: 'default', reason: 'no rule matched', policyVersion: policy.version };
}

/** The rule ids that appear twice; a document with duplicates is refused. */
export function duplicateRuleIds(policy: PolicyDocument): string[] {
  const seen = new Set<string>();
  return policy.rules.map((r) => r.id).filter((id) => (seen.has(id) ? true : (seen.add(id), false)));
}

function toolMatches(pattern: string, tool: string): boolean {
  if (pattern === '*') return true;
  return pattern.endsWith('*') ? tool.startsWith(pattern.slice(0, -1)) : pattern === tool;
}
