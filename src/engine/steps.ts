// STEP_EXECUTION's batch: the ready steps of the DAG (dependencies done), each
// gated by the policy (role × tool permission, risk), run in parallel up to
// max_active_steps through the PEP. A failing step never orphans its siblings:
// the batch settles only when every step in it has finished and been recorded.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { FrozenPlanDoc } from '../decision/decision.js';
import { checkToolPermission, evaluateTransition, type EngineSettings } from '../domain/engine-policy.js';
import type { GlobalState, PolicyDecision, StepContext, StructuredError, ToolFacts } from '../domain/engine-types.js';
import { AbcError } from '../domain/errors.js';
import { decide, verdictRecord, type PolicySet } from '../domain/policy.js';
import { newId } from '../runtime/new-id.js';
import type { Logger } from '../runtime/log.js';
import { ancestors, bindStepOutputs } from '../decision/planner.js';
import type { AssemblyOutput, PackDb, TenantLlm } from '../ports/pack.js';
import { Pep, type Capabilities } from './pep.js';
import { approvedFor, type ExecRecord } from './record.js';
import type { ExecutorData } from './roles/agent.js';
import type { RoleRun } from './roles/index.js';
import { toStructured } from './structured.js';
import { type AnnounceTicket, type StepRow, type TicketRow } from '../store/ticket-store.js';
import { memoryRow, type Memory } from '../store/memory.js';
import { StepCommitQueue, StepCommits, type StepEnd } from './step-commits.js';
import { recordsTarget, type StepCommit } from '../store/step-commit.js';
import type { StepState } from '../domain/contract-lifecycle.machine.js';

export interface BatchKit {
  row: TicketRow;
  /** The ticket's steps as the batch starts. */
  steps: StepRow[];
  rec: ExecRecord;
  plan: FrozenPlanDoc;
  settings: EngineSettings;
  /** How long a step without side effects may run before its start is committed alone. */
  startDeferMs: number;
  signal: AbortSignal;
  em: () => EntityManager;
  db: PackDb;
  llm?: TenantLlm;
  capabilities: Capabilities;
  /** The ticket's tenant's policies, as the batch starts. */
  policy: PolicySet;
  /** Builds the partial result pollers see. */
  output: AssemblyOutput;
  log: Logger;
  memory: Memory;
  global: GlobalState;
  /** Finished steps no review has seen yet: only steps left running restart, then all of them settle as one batch. */
  unreviewed?: string[];
  /** The STEP_EXECUTOR role: binds a step to its call. */
  executor: (ctx: StepContext) => Promise<RoleRun>;
  /** Awaited before any of the batch's steps commits: earlier records that must commit first. */
  before?: () => Promise<unknown>;
  /** Announces a step commit after it (see announcing). */
  announce?: AnnounceTicket;
}

type PlannedStepLike = FrozenPlanDoc['steps'][number];

/** A step held for a human, with what it would call. */
interface HumanHold {
  stepId: string;
  reason: string;
  step: { capability: string; input: Record<string, unknown> };
  policy: PolicyDecision;
}

/**
 * The ends of a batch's steps without side effects, not yet written: the
 * batch's review writes them in its own statement, or `write` commits them
 * first. The last is the batch's last step to end.
 */
export interface HeldSteps {
  commits: StepCommit[];
  write(): Promise<unknown>;
}

export type BatchOutcome =
  | { kind: 'aborted' }
  | { kind: 'done' }
  | { kind: 'stuck'; error: StructuredError }
  | ({ kind: 'human' } & HumanHold)
  | { kind: 'settled'; batch: { id: string; steps: string[]; failures: Record<string, StructuredError>; catch_up?: boolean }; after: StepRow[]; held?: HeldSteps };

const DONE = ['SUCCEEDED', 'SKIPPED'];

export async function runBatch(k: BatchKit): Promise<BatchOutcome> {
  const ticket = k.row.ticket;
  const steps = k.steps;
  const rows = new Map(steps.map((s) => [s.step_id, s]));
  /** Each step's row as last committed in this batch, in position order: what its review reads. */
  const after = new Map(rows);
  const planned = new Map(k.plan.steps.map((s) => [s.id, s]));
  const open = steps.filter((s) => (k.unreviewed ? s.status === 'RUNNING' : s.status === 'PENDING' || s.status === 'RUNNING'));
  if (!open.length && !k.unreviewed) {
    const failed = steps.find((s) => s.status === 'FAILED');
    if (!failed) return { kind: 'done' };
    return { kind: 'stuck', error: toStructured(new AbcError('FAILED_PRECONDITION', { code: 'STEP_FAILED', category: 'EXECUTION', message: `step ${failed.step_id} failed: ${failed.message ?? ''}`, retryable: false }), { step_id: failed.step_id }) };
  }
  const ready = open.filter((s) => (planned.get(s.step_id)?.dependencies ?? []).every((d) => DONE.includes(rows.get(d)?.status ?? '')));
  if (!ready.length && !k.unreviewed) {
    return { kind: 'stuck', error: toStructured(new AbcError('FAILED_PRECONDITION', { code: 'DEPENDENCY_FAILED', category: 'EXECUTION', message: `steps ${open.map((s) => s.step_id).join(', ')} wait on steps that will not finish`, retryable: false })) };
  }

  // The policy gates every step before it runs.
  const runnable: StepRow[] = [];
  const allowed = new Map<string, PolicyDecision>();
  const factsOf = new Map<string, ToolFacts | undefined>();
  const facts = async (capability: string) => {
    if (!factsOf.has(capability)) factsOf.set(capability, await k.capabilities.facts(k.row.tenant_id, capability));
    return factsOf.get(capability);
  };
  const blocked: { step: StepRow; error: StructuredError; policy: PolicyDecision }[] = [];
  let human: HumanHold | undefined;
  for (const step of ready) {
    const tool = await facts(step.capability);
    if (!tool) {
      const error = toStructured(new AbcError('FAILED_PRECONDITION', { code: 'NO_EXECUTION_UNIT', category: 'EXECUTION', message: `nothing serves ${step.capability}`, retryable: false }), { step_id: step.step_id, capability: step.capability });
      blocked.push({ step, error, policy: { allow: false, risk_level: 'HIGH', require_human_approval: false, blocked_tools: [step.capability], reason: error.message } });
      continue;
    }
    if (!checkToolPermission('STEP_EXECUTOR', tool, k.settings)) {
      const reason = `STEP_EXECUTOR may not call ${tool.permission_level} tools (${step.capability})`;
      const error = toStructured(new AbcError('PERMISSION_DENIED', { code: 'TOOL_PERMISSION_DENIED', category: 'COMPLIANCE', message: reason, retryable: false, details: { role: 'STEP_EXECUTOR', tool: step.capability, permission_level: tool.permission_level } }), {
        step_id: step.step_id,
        capability: step.capability,
      });
      blocked.push({ step, error, policy: { allow: false, risk_level: 'HIGH', require_human_approval: false, blocked_tools: [step.capability], reason, action: 'HALT' } });
      continue;
    }
    // The policy, the same engine that decides agents' tool calls: here it fails or holds a
    // step before it starts; the PEP asks it again for whatever capability actually runs.
    const verdict = decide(k.policy, {
      tool: step.capability, args: planned.get(step.step_id)?.input ?? {}, agentId: '', permissionLevel: tool.permission_level, tenantId: k.row.tenant_id, action: 'contract_step',
    });
    const ruled = verdictRecord(verdict);
    if (verdict.decision === 'block') {
      const reason = `blocked by policy rule ${verdict.ruleId}: ${verdict.reason}`;
      const error = toStructured(new AbcError('PERMISSION_DENIED', { code: 'POLICY_BLOCKED', category: 'COMPLIANCE', message: reason, retryable: false, details: { capability: step.capability, ...ruled } }), {
        step_id: step.step_id,
        capability: step.capability,
      });
      blocked.push({ step, error, policy: { allow: false, risk_level: 'HIGH', require_human_approval: false, blocked_tools: [step.capability], reason, action: 'HALT', ...ruled } });
      continue;
    }
    if (verdict.decision === 'require_approval' && !approvedFor(k.rec, step.step_id, planned.get(step.step_id)?.input)) {
      const reason = `policy rule ${verdict.ruleId} asks a human to approve ${step.capability}: ${verdict.reason}`;
      human ??= {
        stepId: step.step_id, reason, step: { capability: step.capability, input: planned.get(step.step_id)?.input ?? {} },
        policy: { allow: false, risk_level: 'HIGH', require_human_approval: true, blocked_tools: [], reason, action: 'WAIT_HUMAN', ...ruled },
      };
      continue;
    }
    const decision = evaluateTransition(k.global, k.rec, k.settings, { kind: 'step_start', step_id: step.step_id, tool });
    if (!decision.allow) {
      human ??= { stepId: step.step_id, reason: decision.reason ?? 'human approval required', step: { capability: step.capability, input: planned.get(step.step_id)?.input ?? {} }, policy: decision };
      continue;
    }
    allowed.set(step.step_id, decision);
    runnable.push(step);
  }
  if (!runnable.length && !blocked.length && human) return { kind: 'human', ...human };

  const batchId = newId('batch');
  const failures: Record<string, StructuredError> = {};
  const committer = new StepCommitQueue(k.em, k.before, k.announce);
  for (const b of blocked) {
    failures[b.step.step_id] = b.error;
    after.set(b.step.step_id, await committer.commit({
      ticket,
      stepId: b.step.step_id,
      row: b.step,
      hops: [{
        trigger: 'fail',
        message: b.error.message,
        trace: [{ type: 'POLICY_EVALUATION', payload: { ...b.policy, step_id: b.step.step_id, role: 'STEP_EXECUTOR' } }],
      }],
    }));
  }

  const pep = new Pep(new Set(k.plan.whitelist.map((c) => c.name)), k.capabilities, k.policy);
  const running = new Set<string>();
  let held: HeldSteps | undefined;
  /**
   * Ends of steps without side effects: each waits up to startDeferMs for the
   * batch to settle, to go with its review, then commits alone.
   */
  const waiting = new Map<string, Holding>();
  const alone: Promise<void>[] = [];
  let failed: { error: unknown } | undefined;
  const writeAlone = (id: string) => {
    const w = waiting.get(id);
    if (!w) return;
    waiting.delete(id);
    clearTimeout(w.timer);
    alone.push(w.commits.write(w.commit).then((done) => void (done && after.set(id, done)), (error: unknown) => void (failed ??= { error })));
  };
  /** Commits the ends still waiting, and waits for those that went alone. */
  const flushWaiting = async () => {
    for (const id of [...waiting.keys()]) writeAlone(id);
    await Promise.all(alone);
    if (failed) throw failed.error;
  };
  const outputs = Object.fromEntries(steps.filter((s) => s.status === 'SUCCEEDED').map((s) => [s.step_id, s.output]));

  const runOne = async (row: StepRow) => {
    const id = row.step_id;
    const step = planned.get(id)!;
    running.add(id);
    try {
      const ctx: StepContext = { step_id: id, tool_input: step.input, validation_flags: {}, start_time: new Date().toISOString() };
      const bound = await k.executor(ctx);
      const call = bound.output.data as ExecutorData | undefined;
      const started = Date.now();
      const active = [...running].sort();
      // A step without side effects may run again after a crash: its start may wait for its end, and its end for its batch's review.
      const pure = await withoutSideEffects([step.tool_name, step.fallback_tool, call?.capability]);
      const commits = new StepCommits(
        committer,
        {
          ticket,
          stepId: id,
          row,
          hops: [{
            trigger: row.status === 'RUNNING' ? 'restart' : 'start',
            trace: [
              { type: 'POLICY_EVALUATION', payload: { ...allowed.get(id)!, step_id: id, role: 'STEP_EXECUTOR', tool: row.capability } },
              { type: 'AGENT_DECISION', payload: { role: 'STEP_EXECUTOR', agents: bound.agents, success: bound.output.success, confidence: bound.output.confidence, step_id: id } },
              { type: 'TOOL_CALL_START', payload: { step_id: id, capability: call?.capability ?? step.tool_name, batch_id: batchId, active_steps: active } },
            ],
          }],
          // The step's context lives in EPHEMERAL memory until its review.
          memory: [memoryRow(k.row.tenant_id, 'step_context', { ...ctx, ...(call && { tool_input: call.input }) }, 'EPHEMERAL', `${ticket}:${id}`)],
        },
        row.status === 'PENDING' && k.startDeferMs > 0 && pure ? k.startDeferMs : 0,
      );
      if (!(await commits.open())) return;
      const llmCalls: Record<string, unknown>[] = [];
      try {
        if (!bound.output.success || !call) throw new AbcError('FAILED_PRECONDITION', { code: 'EXECUTOR_FAILED', category: 'EXECUTION', message: bound.output.errors[0]?.message ?? 'the step executor did not bind the step', retryable: true });
        if (call.capability !== step.tool_name && call.capability !== step.fallback_tool) {
          throw new AbcError('PERMISSION_DENIED', { code: 'EXECUTOR_OFF_PLAN', category: 'COMPLIANCE', message: `the executor asked for ${call.capability}, which step ${id} does not plan`, retryable: false });
        }
        const before = ancestors(k.plan.steps, id);
        const deps = Object.fromEntries(Object.entries(outputs).filter(([d]) => before.has(d)));
        const constraints = k.plan.whitelist.find((c) => c.name === call.capability)?.constraints;
        const input = bindStepOutputs(call.input, deps) as Record<string, unknown>;
        const unit = { input, deps, db: k.db, llm: k.llm?.forTenant(k.row.tenant_id), onLlmCall: (r: Record<string, unknown>) => llmCalls.push(r), signal: k.signal, constraints };
        const result = await runWithFallback(pep, k, step, call.capability, unit);
        outputs[id] = result.value;
        const used = await facts(result.capability);
        const end: StepEnd = {
          hop: { trigger: 'succeed', trace: [{ type: 'TOOL_CALL_END', payload: { step_id: id, capability: result.capability, success: true, latency_ms: Date.now() - started, side_effect_occurred: used?.side_effect ?? false, ...(llmCalls.length && { llm_calls: llmCalls }) } }], ...(result.note && { message: result.note }) },
          output: result.value,
          // A fallback that ran is what rollback must know about.
          ...(result.capability !== row.capability && { capability: result.capability, sideEffect: used?.side_effect ?? false }),
          // What pollers may see of the running ticket, written with the step's events.
          partialResult: k.output.partialResult(k.row.request, outputs) ?? undefined,
          // The primary capability failed even though the step went on: later planners should know.
          ...(result.failed && { also: (tx: EntityManager) => k.memory.recordFailurePattern(k.row.tenant_id, { intent: String(k.row.request.intent), capability: call.capability, code: result.failed!.code, message: result.failed!.message.slice(0, 200) }, tx) }),
        };
        // A step without side effects leaves its end to the batch's review, which may write it in its own statement.
        const commit = pure ? await commits.held(end) : undefined;
        const to = commit && recordsTarget(commit);
        if (commit && to) {
          waiting.set(id, { commit, commits, row, to, timer: setTimeout(() => writeAlone(id), k.startDeferMs) });
        } else {
          const done = commit ? await commits.write(commit) : await commits.close(end);
          if (done) after.set(id, done);
        }
      } catch (error) {
        const structured = toStructured(error, { step_id: id, capability: call?.capability ?? step.tool_name });
        failures[id] = structured;
        const done = await commits.close({
          hop: {
            trigger: 'fail',
            message: structured.message.slice(0, 500),
            trace: [{ type: 'TOOL_CALL_END', payload: { step_id: id, capability: call?.capability ?? step.tool_name, success: false, latency_ms: Date.now() - started, error: structured, ...(llmCalls.length && { llm_calls: llmCalls }) } }],
          },
        });
        if (done) after.set(id, done);
      }
    } finally {
      running.delete(id);
    }
  };

  /** Whether every capability a step may call is known and has no side effects. */
  const withoutSideEffects = async (capabilities: (string | undefined)[]) => {
    for (const capability of new Set(capabilities.filter((c): c is string => Boolean(c)))) if ((await facts(capability))?.side_effect !== false) return false;
    return true;
  };

  // Up to max_active_steps at once; a freed slot takes the next ready step of
  // this batch, until a step fails (then running siblings finish, none start).
  const started: StepRow[] = [];
  const queue = [...runnable];
  const pool = new Set<Promise<void>>();
  while (queue.length || pool.size) {
    while (queue.length && pool.size < k.settings.max_active_steps && !Object.keys(failures).length && !k.signal.aborted) {
      const next = queue.shift()!;
      started.push(next);
      const p: Promise<void> = runOne(next).finally(() => pool.delete(p));
      pool.add(p);
    }
    if (!pool.size) break;
    await Promise.race(pool);
  }
  // A batch that settled whole leaves the waiting ends to its review; otherwise they commit now.
  if (waiting.size && !Object.keys(failures).length && !k.signal.aborted) {
    const all = [...waiting.values()];
    waiting.clear();
    for (const w of all) clearTimeout(w.timer);
    held = { commits: all.map((w) => w.commit), write: () => Promise.all(all.map((w) => w.commits.write(w.commit))) };
    for (const w of all) after.set(w.row.step_id, writtenAs({ ...w.row, ...(w.commit.row as Partial<StepRow>) }, w.commit, w.to));
  }
  await flushWaiting();
  // A cancel has already skipped what never started, in its own transaction.
  if (k.signal.aborted) return { kind: 'aborted' };
  const settled = [...blocked.map((b) => b.step.step_id), ...started.map((s) => s.step_id)];
  // A batch that only catches up on earlier steps is no evidence the failures stopped.
  return {
    kind: 'settled',
    batch: { id: batchId, steps: [...new Set([...(k.unreviewed ?? []), ...settled])], failures, ...(!settled.length && { catch_up: true }) },
    after: [...after.values()],
    ...(held && { held }),
  };
}

/** A step end waiting for its batch's review. */
interface Holding {
  commit: StepCommit;
  commits: StepCommits;
  row: StepRow;
  to: StepState;
  timer: NodeJS.Timeout;
}

/** The step row a held commit writes (its clocks as this core reads them). */
function writtenAs(row: StepRow, c: StepCommit, to: StepState): StepRow {
  const now = new Date();
  const message = c.hops.reduce<string | undefined>((m, h) => h.message ?? m, undefined);
  return {
    ...row,
    status: to,
    output: c.output ?? row.output,
    message: message ?? row.message,
    capability: c.capability ?? row.capability,
    side_effect: c.sideEffect ?? row.side_effect,
    started_at: c.hops.some((h) => h.trigger === 'start' || h.trigger === 'restart') ? now : row.started_at,
    ended_at: now,
  };
}

/** Runs a step on its capability; an allowed fallback capability takes over if it fails (not for compliance). */
async function runWithFallback(
  pep: Pep,
  k: BatchKit,
  step: PlannedStepLike,
  capability: string,
  unit: Parameters<Pep['execute']>[1],
): Promise<{ value: unknown; capability: string; note?: string; failed?: StructuredError }> {
  // Approval holds for the capability and planned input the step was held for, not for a fallback or another capability an executor picked.
  const approved = (c: string) => c === step.tool_name && approvedFor(k.rec, step.id, step.input);
  const call = (c: string) => pep.execute({ ticket: k.row.ticket, tenantId: k.row.tenant_id, stepId: step.id, capability: c, timeoutMs: step.timeout_ms, approved: approved(c) }, unit);
  const fallback = step.fallback_tool;
  try {
    return { value: await call(capability), capability };
  } catch (error) {
    const e = AbcError.from(error);
    if (!fallback || fallback === capability || e.payload.category === 'COMPLIANCE' || k.signal.aborted) throw error;
    k.log.warn({ ticket: k.row.ticket, step: step.id, err: error }, 'step failed; using its fallback capability');
    const reason = error instanceof AbcError ? e.payload.message : String((error as Error).message ?? error).slice(0, 200);
    return { value: await call(fallback), capability: fallback, note: `${capability} failed (${reason}); ${fallback} was used`, failed: toStructured(error, { step_id: step.id, capability }) };
  }
}
