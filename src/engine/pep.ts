// The policy enforcement point: every plan step runs through it. A capability
// outside the plan's whitelist (VCS) is refused with COMPLIANCE; an allowed one
// runs on its execution unit within the step's timeout.
import { traceparentOf } from '../runtime/tracing.js';
import { AbcError, ERROR_CATEGORIES, type ErrorCategory } from '../domain/errors.js';
import type { ToolFacts } from '../domain/engine-types.js';
import type { UnitCatalog } from '../execution/units.js';
import type { ToolKinds } from '../execution/tool-kinds.js';
import type { UnitContext } from '../ports/pack.js';
import { runServerTool, ToolFailure } from '../execution/tool-runner.js';
import type { Secrets } from '../access/secrets.js';
import type { ToolCatalog } from '../store/tool-catalog.js';
import { decide, verdictRecord, type PermissionLevel, type PolicySet } from '../domain/policy.js';
import type { ToolRow } from '../domain/tool.js';

export const TOOL_CAPABILITY_PREFIX = 'tool.';

const STATUS_OF_CATEGORY = { VALIDATION: 'INVALID_ARGUMENT', AUTH: 'PERMISSION_DENIED', DATA_SOURCE: 'NOT_FOUND', EXECUTION: 'INTERNAL', TIMEOUT: 'DEADLINE_EXCEEDED', COMPLIANCE: 'PERMISSION_DENIED', INTERNAL: 'INTERNAL' } as const;

/** What serves plan steps: execution units (built-in and packs') and registered server tools (`tool.<name>`). */
export class Capabilities {
  constructor(
    readonly units: UnitCatalog,
    readonly kinds: ToolKinds,
    readonly llmConfigured: boolean,
    /** The tools each tenant sees, as this core last read them. */
    readonly tools: ToolCatalog,
    /** Connector credentials for webhook tools, in the ticket's tenant. */
    readonly secrets?: Secrets,
  ) {}

  /** What the control plane grants a tenant: units (LLM ones only with a router) and the server tools it sees. */
  async granted(tenantId: string): Promise<Set<string>> {
    const granted = new Set(this.units.names(this.llmConfigured));
    for (const tool of await this.tools.list(tenantId)) if (!this.kinds.clientSide(tool.kind)) granted.add(`${TOOL_CAPABILITY_PREFIX}${tool.name}`);
    return granted;
  }

  /** A capability's tool metadata (permission, side effect, schemas), or undefined if nothing serves it. */
  async facts(tenantId: string, capability: string): Promise<ToolFacts | undefined> {
    if (capability.startsWith(TOOL_CAPABILITY_PREFIX)) {
      const tool = await this.tools.get(tenantId, capability.slice(TOOL_CAPABILITY_PREFIX.length)).catch(() => undefined);
      if (!tool || this.kinds.clientSide(tool.kind)) return undefined;
      return { name: capability, permission_level: tool.permissionLevel, side_effect: tool.sideEffect, input_schema: tool.inputSchema, output_schema: tool.outputSchema };
    }
    const meta = this.units.meta(capability);
    return meta && { name: capability, permission_level: meta.permission_level, side_effect: meta.side_effect, input_schema: null, output_schema: meta.output_schema };
  }
}

export interface StepCall {
  ticket: string;
  tenantId: string;
  stepId: string;
  capability: string;
  timeoutMs: number;
  /** A human approved this capability for this step (the policy's require_approval is met). */
  approved: boolean;
}

export class Pep {
  constructor(
    readonly whitelist: ReadonlySet<string>,
    readonly capabilities: Capabilities,
    /** The ticket's tenant's policies, asked for every capability that actually runs (a fallback, an executor's choice). */
    readonly policy: PolicySet,
  ) {}

  /** Throws COMPLIANCE unless the capability may run under this plan. */
  check(capability: string): void {
    if (!this.whitelist.has(capability)) {
      throw new AbcError('PERMISSION_DENIED', {
        code: 'CAPABILITY_NOT_WHITELISTED',
        category: 'COMPLIANCE',
        message: `capability ${capability} is not in the plan's capability whitelist`,
        retryable: false,
        details: { capability, whitelist: [...this.whitelist].sort() },
      });
    }
    if (capability.startsWith('llm.') && !this.capabilities.llmConfigured) {
      throw new AbcError('PERMISSION_DENIED', { code: 'LLM_NOT_CONFIGURED', category: 'COMPLIANCE', message: `${capability} needs LLM_ROUTER_URL`, retryable: false });
    }
  }

  /** Throws COMPLIANCE unless the policy lets the capability run with this input now. */
  ask(call: StepCall, input: Record<string, unknown>, permissionLevel: PermissionLevel): void {
    const verdict = decide(this.policy, { tool: call.capability, args: input, agentId: '', permissionLevel, tenantId: call.tenantId, action: 'contract_step' });
    if (verdict.decision === 'allow' || (verdict.decision === 'require_approval' && call.approved)) return;
    const why = verdict.decision === 'block' ? verdict.reason : `${verdict.reason} (it needs a human's approval, which only a step's own capability can wait for)`;
    throw new AbcError('PERMISSION_DENIED', {
      code: 'POLICY_BLOCKED',
      category: 'COMPLIANCE',
      message: `blocked by policy rule ${verdict.ruleId}: ${why}`,
      retryable: false,
      details: { capability: call.capability, ...verdictRecord(verdict) },
    });
  }

  /** Runs one step's capability. */
  async execute(call: StepCall, ctx: UnitContext): Promise<unknown> {
    this.check(call.capability);
    const tool = call.capability.startsWith(TOOL_CAPABILITY_PREFIX) ? await this.capabilities.tools.get(call.tenantId, call.capability.slice(TOOL_CAPABILITY_PREFIX.length)) : undefined;
    this.ask(call, ctx.input, tool?.permissionLevel ?? this.capabilities.units.meta(call.capability)?.permission_level ?? 'PUBLIC');
    // The unit's signal aborts on a cancel or at the deadline, and the step then fails at once;
    // the timer and the listener go with the step, not with the deadline.
    const controller = new AbortController();
    if (ctx.signal.aborted) controller.abort(ctx.signal.reason);
    return new Promise((resolve, reject) => {
      const fail = (error: AbcError, reason: unknown) => {
        settle();
        controller.abort(reason);
        reject(error);
      };
      const timer = setTimeout(() => {
        const error = new AbcError('DEADLINE_EXCEEDED', { code: 'STEP_TIMEOUT', category: 'TIMEOUT', message: `step ${call.stepId} did not finish within ${call.timeoutMs} ms`, retryable: true });
        fail(error, error);
      }, call.timeoutMs).unref();
      const onCancel = () => fail(new AbcError('CANCELLED', { code: 'STEP_CANCELLED', category: 'EXECUTION', message: `step ${call.stepId} was cancelled`, retryable: false }), ctx.signal.reason);
      const settle = () => {
        clearTimeout(timer);
        ctx.signal.removeEventListener('abort', onCancel);
      };
      if (!controller.signal.aborted) ctx.signal.addEventListener('abort', onCancel, { once: true });
      this.#run(call, { ...ctx, signal: controller.signal }, tool).then(
        (value) => (settle(), resolve(value)),
        (error: unknown) => (settle(), reject(error)),
      );
    });
  }

  #secret(tenantId: string, ref: string): Promise<string> {
    if (!this.capabilities.secrets) throw new Error('no secret store is configured');
    return this.capabilities.secrets.resolve(tenantId, ref);
  }

  async #run(call: StepCall, ctx: UnitContext, tool: ToolRow | undefined): Promise<unknown> {
    if (tool) {
      try {
        return await runServerTool(this.capabilities.kinds, { tool, args: ctx.input, toolCallId: `${call.ticket}:${call.stepId}`, runId: call.ticket, timeoutMs: call.timeoutMs, signal: ctx.signal, secret: (ref) => this.#secret(call.tenantId, ref), traceparent: traceparentOf() });
      } catch (error) {
        if (error instanceof ToolFailure) {
          // A webhook may name its error's category (DATA_SOURCE for "no such record"): the ticket fails as that.
          const category = (ERROR_CATEGORIES as readonly unknown[]).includes(error.detail?.category) ? (error.detail!.category as ErrorCategory) : 'EXECUTION';
          throw new AbcError(STATUS_OF_CATEGORY[category], {
            code: error.code,
            category,
            message: error.message,
            retryable: error.code === 'tool_timeout' || error.detail?.retryable === true,
            ...(error.detail && { details: { tool_error: error.detail } }),
          });
        }
        throw error;
      }
    }
    return this.capabilities.units.unit(call.capability).run(ctx);
  }
}
