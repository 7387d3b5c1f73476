// The contract engine: runs each ticket's lifecycle (resolve_context → plan →
// execute → aggregate → package) for the queue. It advances state only through
// ticket-store, executes steps only through the PEP, and never retries or
// replans on its own.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ContractRegistry } from '../contracts/registry.js';
import type { Decision, FrozenPlanDoc } from '../decision/decision.js';
import { AbcError } from '../domain/errors.js';
import type { MarketData } from '../portfolio/market.js';
import type { Logger } from '../log.js';
import type { EventBus } from '../store/event-bus.js';
import type { Orm } from '../store/orm.js';
import { aggregate, partialResult, render } from './analyze-portfolio.js';
import { openContract } from '../store/execution-contracts.js';
import { Pep, TOOL_CAPABILITY_PREFIX } from './pep.js';
import { ContractQueue } from './queue.js';
import { getSteps, getTicket, transitionStep, transitionTicket, type StepRow, type TicketRow } from './ticket-store.js';

export interface EngineOptions {
  orm: Orm;
  bus: EventBus;
  log: Logger;
  decision: Decision;
  contracts: ContractRegistry;
  market: MarketData;
  llm?: { baseUrl: string; apiKey?: string; model: string };
  /** Queue workers in this process; 0 only enqueues. */
  concurrency: number;
  /** Steps of one ticket that may run at once. */
  stepConcurrency: number;
  /** How long a worker's claim on a ticket lasts without renewal. */
  leaseMs: number;
  pollIntervalMs?: number;
}

type Outputs = Record<string, unknown>;

export class ContractEngine {
  readonly queue: ContractQueue;
  readonly #log: Logger;

  constructor(readonly opts: EngineOptions) {
    this.#log = opts.log.child({ component: 'contract-engine' });
    this.queue = new ContractQueue({ orm: opts.orm, log: this.#log, concurrency: opts.concurrency, leaseMs: opts.leaseMs, pollIntervalMs: opts.pollIntervalMs });
  }

  /** Installs the queue and starts its workers on this engine. */
  start(): Promise<void> {
    return this.queue.start((ticket, workerId) => this.execute(ticket, workerId));
  }

  close(): Promise<void> {
    return this.queue.close();
  }

  /** Runs (or resumes) one ticket's lifecycle to a terminal state. */
  async execute(ticket: string, workerId: string): Promise<void> {
    const abort = new AbortController();
    // Subscribed before the claim reads the row, so a cancel cannot slip between them.
    const offCancel = this.opts.bus.onCancel(ticket, () => abort.abort());
    const claimed = await this.#claim(ticket, workerId).catch((error: unknown) => {
      offCancel();
      throw error;
    });
    if (!claimed) return offCancel();
    const letGo = this.queue.hold(ticket, workerId, () => abort.abort());
    try {
      await this.#advance(ticket, abort.signal);
    } catch (error) {
      // The database failing under the orchestrator is the queue's to retry:
      // the next attempt resumes from the last committed transition.
      if (!(error instanceof StepFailed) && isInfrastructure(error)) throw error;
      await this.#fail(ticket, error instanceof StepFailed ? error.cause : error);
    } finally {
      letGo();
      offCancel();
      await this.queue.release(ticket, workerId);
    }
  }

  async #claim(ticket: string, workerId: string): Promise<TicketRow | undefined> {
    return this.opts.orm.em.fork().transactional(async (tx) => {
      const row = await getTicket(tx, ticket, true);
      if (!row || ['SUCCEEDED', 'FAILED', 'CANCELED'].includes(row.lifecycle_state)) return undefined;
      await this.queue.claim(tx, ticket, workerId);
      if (row.lifecycle_state === 'QUEUED') return transitionTicket(tx, ticket, 'start', {}, 'worker');
      return row;
    });
  }

  async #advance(ticket: string, signal: AbortSignal): Promise<void> {
    const orm = this.opts.orm;
    for (;;) {
      if (signal.aborted) return;
      const row = (await getTicket(orm.em.fork(), ticket))!;
      switch (row.lifecycle_state) {
        case 'RESOLVING_CONTEXT':
          await this.#resolveContext(row);
          break;
        case 'PLANNING':
          await this.#plan(row);
          break;
        case 'EXECUTING':
          await this.#executeSteps(row, signal);
          break;
        case 'AGGREGATING':
          await this.#aggregate(row);
          break;
        case 'PACKAGING':
          await this.#package(row);
          break;
        default:
          return;
      }
    }
  }

  /** resolve_context: the contract and the assembly that will plan it. */
  async #resolveContext(row: TicketRow): Promise<void> {
    const contract = this.opts.contracts.get(row.contract_id, row.contract_version);
    if (!contract) throw new AbcError('FAILED_PRECONDITION', { code: 'UNKNOWN_CONTRACT', category: 'VALIDATION', message: `contract ${row.contract_id}@${row.contract_version} is no longer registered`, retryable: false });
    const assembly = await this.opts.decision.resolve(contract.intent, row.assembly_version ?? undefined);
    await this.opts.orm.em.fork().transactional((tx) =>
      transitionTicket(tx, row.ticket, 'context_resolved', { assembly_id: assembly.assembly_id, assembly_version: assembly.version }),
    );
  }

  /** plan: a frozen plan from the decision plane, and one PENDING (or SKIPPED) row per step, in one transaction. */
  async #plan(row: TicketRow): Promise<void> {
    const req = row.request as { intent: string; contract: { contract_id: string; version: string }; context: Record<string, unknown>; input?: Record<string, unknown>; output_spec: Record<string, unknown> };
    await this.opts.orm.em.fork().transactional(async (tx) => {
      const plan = await this.opts.decision.plan(
        { intent: req.intent, contract: req.contract, context: req.context, input: req.input, output_spec: req.output_spec, executionId: row.ticket, assemblyVersion: row.assembly_version ?? undefined },
        tx,
      );
      await tx.execute(
        `INSERT INTO contract_steps (ticket, step_id, position, label, capability, status, message)
         SELECT ?, s.step_id, s.position, s.label, s.capability, 'PENDING', NULL
         FROM jsonb_to_recordset(?::jsonb) AS s(step_id text, position int, label text, capability text)`,
        [row.ticket, JSON.stringify(plan.steps.map((s, i) => ({ step_id: s.id, position: i, label: s.label, capability: s.tool_name })))],
      );
      // Each step is a seed-004 execution contract too; a tool with side effects makes it irreversible.
      const effects = await sideEffects(tx, plan.steps.map((s) => s.tool_name));
      for (const s of plan.steps) {
        await openContract(tx, {
          sessionId: row.session_id,
          ticket: row.ticket,
          subjectId: s.id,
          actionType: 'contract_step',
          actionSummary: `${s.tool_name} → ${s.label}`,
          irreversible: effects.has(s.tool_name),
          idempotencyKey: `${row.ticket}:${s.id}`,
          timeoutSeconds: Math.ceil(s.timeout_ms / 1000),
        });
      }
      for (const s of plan.steps.filter((x) => x.skipped)) await transitionStep(tx, row.ticket, s.id, 'skip', { message: s.skip_reason ?? 'not requested' });
      await transitionTicket(tx, row.ticket, 'planned', { plan_id: plan.plan_id }, 'decision');
    });
  }

  /**
   * execute: the plan's DAG. Steps whose dependencies are done run in parallel
   * (up to stepConcurrency). Finished steps are loaded, never re-run. On a
   * failure no new step starts, running siblings finish, and the rest are skipped.
   */
  async #executeSteps(row: TicketRow, signal: AbortSignal): Promise<void> {
    const em = () => this.opts.orm.em.fork();
    const plan = (await this.opts.decision.getPlan(row.plan_id!))!;
    const pep = new Pep(new Set(plan.whitelist.map((c) => c.name)), Boolean(this.opts.llm));
    const steps = await getSteps(em(), row.ticket);
    const rows = new Map(steps.map((s) => [s.step_id, s]));
    // Finished steps are loaded, never re-run.
    const outputs = outputsOf(steps);
    const state = (id: string) => rows.get(id)!.status;
    const running = new Map<string, Promise<void>>();
    let failure: unknown;

    const runStep = async (id: string) => {
      const step = plan.steps.find((s) => s.id === id)!;
      const resumed = state(id) === 'RUNNING';
      rows.set(id, await em().transactional((tx) => transitionStep(tx, row.ticket, id, resumed ? 'restart' : 'start')));
      try {
        const output = await this.#runWithFallback(pep, row, plan, step, outputs, signal);
        outputs[id] = output.value;
        rows.set(
          id,
          await em().transactional(async (tx) => {
            const done = await transitionStep(tx, row.ticket, id, 'succeed', { output: output.value, ...(output.note && { message: output.note }) });
            const partial = partialResult(row.request, outputs);
            if (partial) await tx.execute('UPDATE contract_executions SET partial_result = ?::json, updated_at = now() WHERE ticket = ?', [JSON.stringify(partial), row.ticket]);
            return done;
          }),
        );
      } catch (error) {
        failure ??= error;
        const message = AbcError.from(error).payload.message;
        rows.set(id, await em().transactional((tx) => transitionStep(tx, row.ticket, id, 'fail', { message })));
      }
    };

    for (;;) {
      if (!failure && !signal.aborted) {
        const ready = [...rows.values()]
          .filter((s) => (s.status === 'PENDING' || (s.status === 'RUNNING' && !running.has(s.step_id))) && !running.has(s.step_id))
          .filter((s) => plan.steps.find((p) => p.id === s.step_id)!.dependencies.every((d) => ['SUCCEEDED', 'SKIPPED'].includes(state(d))));
        for (const s of ready.slice(0, Math.max(0, this.opts.stepConcurrency - running.size))) {
          running.set(s.step_id, runStep(s.step_id).finally(() => running.delete(s.step_id)));
        }
      }
      if (running.size === 0) break;
      await Promise.race(running.values());
    }
    if (signal.aborted) {
      // Cancelled (not a lost claim): what never started will not start.
      await em().transactional(async (tx) => {
        if ((await getTicket(tx, row.ticket, true))?.lifecycle_state !== 'CANCELED') return;
        for (const s of rows.values()) if (s.status === 'PENDING') await transitionStep(tx, row.ticket, s.step_id, 'skip', { message: 'not run: the ticket was cancelled' });
      });
      return;
    }
    if (failure) {
      await em().transactional(async (tx) => {
        for (const s of rows.values()) if (s.status === 'PENDING') await transitionStep(tx, row.ticket, s.step_id, 'skip', { message: 'not run: an earlier step failed' });
      });
      throw new StepFailed(failure);
    }
    await em().transactional((tx) => transitionTicket(tx, row.ticket, 'executed'));
  }

  /** Runs a step on its capability; an allowed fallback capability takes over if it fails. */
  async #runWithFallback(pep: Pep, row: TicketRow, plan: FrozenPlanDoc, step: FrozenPlanDoc['steps'][number], outputs: Outputs, signal: AbortSignal): Promise<{ value: unknown; note?: string }> {
    const ancestors = ancestorsOf(plan, step.id);
    const deps = Object.fromEntries(Object.entries(outputs).filter(([k]) => ancestors.has(k)));
    const ctx = { input: step.input, deps, em: () => this.opts.orm.em.fork(), market: this.opts.market, llm: this.opts.llm, signal };
    const call = (capability: string) => pep.execute({ ticket: row.ticket, stepId: step.id, capability, timeoutMs: step.timeout_ms }, ctx);
    const fallback = step.fallback_tool;
    try {
      return { value: await call(step.tool_name) };
    } catch (error) {
      const e = AbcError.from(error);
      if (!fallback || e.payload.category === 'COMPLIANCE' || signal.aborted) throw error;
      this.#log.warn({ ticket: row.ticket, step: step.id, err: error }, 'step failed; using its fallback capability');
      const reason = error instanceof AbcError ? e.payload.message : String((error as Error).message ?? error).slice(0, 200);
      return { value: await call(fallback), note: `${step.tool_name} failed (${reason}); ${fallback} was used` };
    }
  }

  /** aggregate: the result document from the step outputs. */
  async #aggregate(row: TicketRow): Promise<void> {
    const done = (await getSteps(this.opts.orm.em.fork(), row.ticket)).filter((s) => s.status === 'SUCCEEDED');
    const { result, warnings } = aggregate(row.request, outputsOf(done));
    // A step that finished by another path (its fallback) says so.
    const notes = done.filter((s) => s.message).map((s) => `${s.step_id}: ${s.message}`);
    await this.opts.orm.em.fork().transactional((tx) => transitionTicket(tx, row.ticket, 'aggregated', { result, warnings: [...warnings, ...notes] }));
  }

  /** package: the result must satisfy the contract's result schema; then the artifact is rendered. */
  async #package(row: TicketRow): Promise<void> {
    const contract = this.opts.contracts.get(row.contract_id, row.contract_version)!;
    const check = this.opts.contracts.validateResponse(contract, 'result', row.result);
    if (!check.ok) {
      this.#log.error({ ticket: row.ticket, violations: check.violations }, 'result breaks the contract result schema');
      throw new AbcError('INTERNAL', { code: 'RESULT_SCHEMA_VIOLATION', message: 'the result did not satisfy the contract result schema', retryable: false, details: { violations: check.violations.slice(0, 5) } });
    }
    const artifact = render(row.request, row.result!, outputsOf(await getSteps(this.opts.orm.em.fork(), row.ticket)));
    await this.opts.orm.em.fork().transactional((tx) =>
      transitionTicket(tx, row.ticket, 'packaged', { artifact: artifact.content, artifact_media_type: artifact.mediaType, partial_result: null }),
    );
  }

  /** Records a failure as the ticket's error (unless it already finished, e.g. was cancelled). */
  async #fail(ticket: string, thrown: unknown): Promise<void> {
    const e = AbcError.from(thrown);
    if (e.payload.category === 'INTERNAL') this.#log.error({ err: thrown, ticket }, 'ticket failed');
    await this.opts.orm.em.fork().transactional(async (tx) => {
      const row = await getTicket(tx, ticket, true);
      if (!row || ['SUCCEEDED', 'FAILED', 'CANCELED'].includes(row.lifecycle_state)) return;
      await transitionTicket(tx, ticket, 'fail', { error: errorDocument(e, row.trace_id) }, e.payload.category === 'COMPLIANCE' ? 'pep' : 'orchestrator');
    });
  }
}

/** The capabilities among `capabilities` that are registered tools with side effects. */
async function sideEffects(tx: EntityManager, capabilities: string[]): Promise<Set<string>> {
  const tools = capabilities.filter((c) => c.startsWith(TOOL_CAPABILITY_PREFIX)).map((c) => c.slice(TOOL_CAPABILITY_PREFIX.length));
  if (!tools.length) return new Set();
  const rows = await tx.execute<{ tool_name: string }[]>('SELECT tool_name FROM tools WHERE side_effect AND tool_name IN (SELECT jsonb_array_elements_text(?::jsonb))', [JSON.stringify(tools)]);
  return new Set(rows.map((r) => `${TOOL_CAPABILITY_PREFIX}${r.tool_name}`));
}

/** A plan step failed: the ticket fails with the step's error. */
class StepFailed extends Error {
  constructor(override readonly cause: unknown) {
    super('a plan step failed');
  }
}

/**
 * Errors of the database connection or of concurrency (lost connection, admin
 * shutdown, too many clients, serialization failure, deadlock), which a later
 * attempt may not meet. A bad query is a bug, not one of these.
 */
function isInfrastructure(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && /^(ECONN|EPIPE|ETIMEDOUT|08|53|57P|40001|40P01)/.test(code);
}

/** The seed error shape of an AbcError. */
export function errorDocument(e: AbcError, traceId: string): Record<string, unknown> {
  const p = e.payload;
  return {
    code: p.code,
    category: p.category,
    message: p.message,
    retryable: p.retryable,
    ...(p.retryAfterSeconds !== undefined && { retry_after_seconds: p.retryAfterSeconds }),
    ...(p.details && { details: p.details }),
    trace_id: p.traceId ?? traceId,
  };
}

/** Outputs of the succeeded steps, by step id. */
const outputsOf = (steps: StepRow[]): Outputs => Object.fromEntries(steps.filter((s) => s.status === 'SUCCEEDED').map((s) => [s.step_id, s.output]));

function ancestorsOf(plan: FrozenPlanDoc, id: string): Set<string> {
  const seen = new Set<string>();
  const visit = (x: string) => {
    for (const d of plan.steps.find((s) => s.id === x)?.dependencies ?? []) if (!seen.has(d)) (seen.add(d), visit(d));
  };
  visit(id);
  return seen;
}
