// Seed 002's engine protocol: the read-only state agents see, what they answer,
// the structured errors and policy decisions that drive self-healing, and the
// trace event types. Pure types and small constructors; no I/O.
import type { LifecycleState } from './contract-lifecycle.machine.js';
import type { PermissionLevel } from './policy.js';

export const AGENT_ROLES = ['CONTEXT_BUILDER', 'PLANNER', 'PLAN_CRITIC', 'STEP_EXECUTOR', 'REVIEWER'] as const;
export type AgentRole = (typeof AGENT_ROLES)[number];

export const RISK_LEVELS = ['LOW', 'MEDIUM', 'HIGH', 'CRITICAL'] as const;
export type RiskLevel = (typeof RISK_LEVELS)[number];

export const MEMORY_SCOPES = ['EPHEMERAL', 'SESSION', 'GLOBAL'] as const;
export type MemoryScope = (typeof MEMORY_SCOPES)[number];

export const TRACE_EVENT_TYPES = [
  'STATE_TRANSITION',
  'AGENT_DECISION',
  'TOOL_CALL_START',
  'TOOL_CALL_END',
  'POLICY_EVALUATION',
  'SNAPSHOT_CREATED',
  'SNAPSHOT_RESTORED',
  'HUMAN_INTERACTION',
  'ERROR_OCCURRED',
] as const;
export type TraceEventType = (typeof TRACE_EVENT_TYPES)[number];

export type SuggestedAction = 'RETRY' | 'REPLAN' | 'ROLLBACK' | 'HALT';
export type Scope = 'LOCAL' | 'GLOBAL';

/** No bare exception crosses a layer: every failure becomes one of these. */
export interface StructuredError {
  code: string;
  message: string;
  severity: 'INFO' | 'WARNING' | 'CRITICAL';
  retryable: boolean;
  suggested_action?: SuggestedAction;
  metadata: Record<string, unknown>;
}

/** Immutable: built fresh for every decision, frozen, and never written by an agent. */
export interface GlobalState {
  readonly execution_id: string;
  readonly original_goal: string;
  readonly lifecycle_state: LifecycleState;
  readonly iteration_count: number;
  readonly trace_id: string;
  readonly created_at: string;
}

/** Ephemeral: what one step needs, dropped when the step is reviewed. */
export interface StepContext {
  step_id: string;
  tool_input?: Record<string, unknown>;
  tool_output?: unknown;
  validation_flags: Record<string, boolean>;
  start_time?: string;
  end_time?: string;
}

export interface AgentOutput {
  success: boolean;
  data?: unknown;
  /** 0..1 */
  confidence: number;
  errors: StructuredError[];
  role: AgentRole;
}

export interface PolicyDecision {
  allow: boolean;
  next_state?: LifecycleState;
  reason?: string;
  risk_level: RiskLevel;
  require_human_approval: boolean;
  blocked_tools: string[];
  /** What the engine does next, and at which scope. */
  action?: SuggestedAction | 'CONTINUE' | 'WAIT_HUMAN';
  scope?: Scope;
  /** When the policy decided: its rule, the version of its document, and whose document (platform or tenant). */
  rule_id?: string;
  policy_version?: number;
  policy_scope?: 'platform' | 'tenant';
}

/** A tool (or built-in capability) as the policy sees it. */
export interface ToolFacts {
  name: string;
  permission_level: PermissionLevel;
  side_effect: boolean;
  input_schema?: Record<string, unknown> | null;
  output_schema?: Record<string, unknown> | null;
}

export const structuredError = (
  code: string,
  message: string,
  opts: Partial<Omit<StructuredError, 'code' | 'message'>> = {},
): StructuredError => ({ code, message, severity: opts.severity ?? 'WARNING', retryable: opts.retryable ?? false, ...(opts.suggested_action && { suggested_action: opts.suggested_action }), metadata: opts.metadata ?? {} });

/** The deep-frozen copies this module made (their roots): shared by later copies, never copied again. */
const deepFrozen = new WeakSet<object>();
const onceFrozen = new WeakMap<object, object>();

/** A deep-frozen copy: agents get state they cannot change. Parts already deep-frozen here are shared. */
export function frozen<T>(value: T): T {
  if (value === null || typeof value !== 'object' || deepFrozen.has(value)) return value;
  const copy = frozenCopy(value) as T & object;
  deepFrozen.add(copy);
  return copy;
}

/** The deep-frozen copy of a value that never changes (a stored assembly, a frozen plan): made once, then shared. */
export function frozenOnce<T extends object>(value: T): T {
  let copy = onceFrozen.get(value);
  if (!copy) onceFrozen.set(value, (copy = frozen(value)));
  return copy as T;
}

function frozenCopy(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || deepFrozen.has(value)) return value;
  let copy: object;
  if (Array.isArray(value)) {
    const array = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) array[i] = frozenCopy(value[i]);
    copy = array;
  } else {
    const proto = Object.getPrototypeOf(value) as unknown;
    if (proto !== Object.prototype && proto !== null) return freezeAll(structuredClone(value)); // a Date and the like
    const object: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      const v = frozenCopy((value as Record<string, unknown>)[key]);
      // A key "__proto__" (JSON.parse makes one) stays a key.
      if (key === '__proto__') Object.defineProperty(object, key, { value: v, enumerable: true, writable: true, configurable: true });
      else object[key] = v;
    }
    copy = object;
  }
  return Object.freeze(copy);
}

function freezeAll<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const x of Object.values(value)) freezeAll(x);
  }
  return value;
}
