// The execution engine (seed 002) on contract executions. It alone moves the
// lifecycle, through ticket-store, one table transition per decision (a few
// may share a commit when nothing external happens between them); agents only
// read frozen state and answer; every step runs through the PEP after the
// policy's role × tool check. Failures become StructuredErrors that the policy
// turns into RETRY, REPLAN (LOCAL or GLOBAL), ROLLBACK, WAIT_HUMAN or HALT.
import type { Secrets } from '../access/secrets.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ContractLookup } from '../ports/contracts.js';
import type { Decision, FrozenPlanDoc } from '../decision/decision.js';
import { planInput } from '../decision/decision.js';
import { goalOf, stepsToReset, type PlanBody, type PlanInput } from '../decision/planner.js';
import { DEFAULT_SETTINGS, evaluateTransition, settingsOf, type EngineSettings } from '../domain/engine-policy.js';
import { frozen, frozenOnce, type AgentRole, type GlobalState, type PolicyDecision, type StepContext, type StructuredError } from '../domain/engine-types.js';
import type { PolicySet } from '../domain/policy.js';
import { AbcError } from '../domain/errors.js';
import { haltError } from '../domain/stored-error.js';
import { InFlight, settlesWithin } from '../runtime/in-flight.js';
import { context as otel, contextInTrace, failSpan, inSpan, startSpan, type Context } from '../runtime/tracing.js';
import { PHASE_OF, statusOf, type LifecycleState, type LifecycleTrigger } from '../domain/contract-lifecycle.machine.js';
import type { PackDb, TenantLlm } from '../ports/pack.js';
import type { AssemblyDef } from '../decision/planner.js';
import type { Logger } from '../runtime/log.js';
import type { EventBus } from '../store/event-bus.js';
import { rawEm, type Orm } from '../store/orm.js';
import type { AssemblyOutputs } from './outputs.js';
import type { Capabilities } from './pep.js';
import { Memory, memoryClear, memoryRow, successCaseWrite, successKey } from '../store/memory.js';
import { ContractQueue } from '../store/ticket-queue.js';
import { recordOf, withError, type ExecRecord, type HumanFeedback } from './record.js';
import type { EngineContextView, PlannerData } from './roles/agent.js';
import { builtinAgents } from './roles/builtin.js';
import { Roles, type RoleRun } from './roles/index.js';
import { restoreSnapshot, snapshotOf, type SnapshotContent } from './snapshots.js';
import { snapshotsInsert, type SnapshotRow } from '../store/snapshot-store.js';
import { runBatch, type HeldSteps } from './steps.js';
import { stepRecords, type StepCommit } from '../store/step-commit.js';
import { isGuardRefusal } from '../store/native.js';
import { decisionEvent, errorDocument, errorEvent, policyEvent, skipPending } from './events.js';
import { answerHuman, awaitHuman, checkHumanDeadline, withdrawHuman, type HumanAsk } from './human.js';
import { firstSteps, syncSteps } from './sync-steps.js';
import { toStructured } from './structured.js';
import { retryWhileUnavailable } from '../store/outage.js';
import { createdRow, createTicket, getSteps, getTicket, getTicketState, insertTicket, transitionStep, transitionTicket, transitionTicketFrom, type AnnounceTicket, type NewTicket, type RecordsFirst, type StepRow, type TicketEventInput, type TicketMoveRecords, type TicketPatch, type TicketRow } from '../store/ticket-store.js';

/** One sync submission's room to run in the submitting core (see ContractEngine.reserveNow); used once. */
export interface NowSlot {
  /**
   * Creates the submission's ticket and runs it in this core at once. The
   * ticket is created claimed by this core (claimNow), with no queue job: with
   * the built-in context builder, planner and critic, in the statement that
   * commits its context and first plan (one commit fewer); otherwise alone,
   * before its context commits. The claim, renewed while this runs, is the
   * way back: if this core stops, the claim lapses and the recovery sweep
   * queues the ticket, so a worker on any core resumes it from its last
   * transition. Afterwards a ticket neither finished nor waiting for a human
   * (its deadline job) is queued to run now; one whose pass ended before it
   * was created is created in INIT and queued.
   *
   * `created` is the ticket as created, or undefined when the idempotency key
   * was taken (nothing was written; the original answers the submission);
   * `ran` is the ticket as this core finished it, else undefined.
   */
  start(ticket: NewTicket, event: TicketEventInput): { created: Promise<TicketRow | undefined>; ran: Promise<TicketRow | undefined> };
  /**
   * Starts reading what memory says about `intent` for the ticket the
   * submission is about to create, so that its context build need not wait
   * for the read (Memory.readAhead). Dropped when its run ends, if the
   * context build did not take it.
   */
  readAhead(ticket: string, tenantId: string, intent: string): void;
}

export interface EngineOptions {
  orm: Orm;
  bus: EventBus;
  log: Logger;
  decision: Decision;
  contracts: ContractLookup;
  /** What serves plan steps. */
  capabilities: Capabilities;
  /** How results and artifacts are built, per assembly. */
  outputs: AssemblyOutputs;
  /** The database as units see it. */
  db: PackDb;
  llm?: TenantLlm;
  /** Queue workers in this process; 0 only enqueues. */
  concurrency: number;
  /** Sync submissions this process runs at once in their own request (only with queue workers); more go through the queue. */
  syncExecutions: number;
  /** Default for steps of one execution that may run at once (max_active_steps). */
  stepConcurrency: number;
  /** How long a step without side effects may run before its start is committed alone (0: always before it runs). */
  stepStartDeferMs: number;
  /** How long a worker's claim on a ticket lasts without renewal. */
  leaseMs: number;
  pollIntervalMs: number;
  /** Defaults under every assembly's `engine` section. */
  settings: Partial<EngineSettings>;
  agentIdleTimeoutMs: number;
  /** Opens agents' tokens (secrets of their tenant). */
  secrets: Secrets;
  /** The policies of a tenant, which every plan step asks before it runs, as agents' tool calls do. */
  policy: (tenantId: string) => PolicySet;
}

const FINISHED = ['COMPLETED', 'FAILED', 'CANCELED'];
const NO_BATCH: NonNullable<ExecRecord['batch']> = { id: 'none', steps: [], failures: {} };

export class ContractEngine {
  readonly queue: ContractQueue;
  readonly memory: Memory;
  readonly roles: Roles;
  readonly #log: Logger;
  readonly #em: () => EntityManager;
  readonly #snapshots = new Map<string, SnapshotContent>();
  /** The ticket's steps as committed with a row a phase answered: the next phase need not read them again. */
  readonly #stepsWith = new WeakMap<TicketRow, StepRow[]>();
  /** A row as its move will write it, by the move still going out (see prepareFirst): the first batch runs meanwhile. */
  readonly #committing = new WeakMap<TicketRow, Promise<TicketRow>>();
  /**
   * What every view of a ticket's pass shares, frozen once: its request (it
   * never changes) and the memory hints its context build found (only that
   * phase sets them, on the core that runs the pass).
   */
  readonly #passes = new Map<string, Pass>();
  /** Tickets this engine is executing, by ticket. */
  readonly #running = new InFlight();
  #stopping = false;
  /**
   * The tickets sync slots are running, by ticket: shutdown waits for them as
   * for the queue's, and their packaging drops their queue job.
   */
  readonly #now = new Map<string, Promise<unknown>>();
  /** Sync slots taken (see reserveNow): the tickets of `#now` and those being created to run here. */
  #slotsTaken = 0;
  /** The tickets sync slots run from before they exist (NowSlot.start), by ticket, and the first row of each pass. */
  readonly #unborn = new Map<string, Unborn>();
  readonly #unbornRows = new WeakMap<TicketRow, Unborn>();
  /** Announces a ticket's change after a commit on its own (see announcing). */
  readonly #announce: AnnounceTicket = (ticket, ended) => this.opts.bus.announceTicket(ticket, ended);

  /** transitionTicket, announced after its commit when `em` commits it on its own (see announcing). */
  #transition(...[em, ticket, trigger, patch, actor, opts]: Parameters<typeof transitionTicket>): Promise<TicketRow> {
    return transitionTicket(em, ticket, trigger, patch, actor, { ...opts, announce: this.#announce });
  }

  constructor(readonly opts: EngineOptions) {
    this.#log = opts.log.child({ component: 'engine' });
    const em = rawEm(opts.orm);
    this.#em = () => em;
    this.queue = new ContractQueue({ orm: opts.orm, log: this.#log, concurrency: opts.concurrency, leaseMs: opts.leaseMs, pollIntervalMs: opts.pollIntervalMs });
    this.memory = new Memory(this.#em);
    this.roles = new Roles(builtinAgents({ em: this.#em, contracts: opts.contracts, decision: opts.decision, memory: this.memory, capabilities: opts.capabilities }), {
      em: this.#em,
      llm: opts.llm,
      agentIdleTimeoutMs: opts.agentIdleTimeoutMs,
      secrets: opts.secrets,
    });
  }

  /** Installs the queue and starts its workers on this engine. */
  start(): Promise<void> {
    return this.queue.start(async (ticket, workerId) => void (await this.execute(ticket, workerId)));
  }

  /**
   * Stops at once taking new tickets, lets the ones in flight finish for up to
   * `graceMs`, then hands the rest back: each stops at its next step boundary
   * and is queued again, so the next core resumes it from its last transition.
   */
  async close(graceMs: number): Promise<void> {
    this.#stopping = true;
    const stopped = Promise.all([this.queue.stopWorkers(), ...this.#now.values()]);
    if (!(await settlesWithin(stopped, graceMs))) {
      this.#log.warn({ tickets: this.#running.keys() }, 'grace period over: handing tickets back to the queue');
      this.#running.abortAll(HAND_BACK);
      await settlesWithin(stopped, HAND_BACK_MS);
    }
    await this.queue.close();
  }

  /**
   * A slot to run one sync submission in this core at once, instead of waiting
   * for a queue worker; undefined when this core has no room (its
   * `syncExecutions` are taken, it has no workers, or it is stopping). The slot
   * is taken before the ticket is created, so concurrent submissions never
   * run more than that many here; its run ends by giving it back.
   */
  reserveNow(): NowSlot | undefined {
    if (this.#stopping || this.opts.concurrency <= 0 || this.#slotsTaken >= this.opts.syncExecutions) return undefined;
    this.#slotsTaken++;
    let used = false;
    let readAhead: string | undefined;
    const dropReadAhead = () => readAhead !== undefined && this.memory.dropReadAhead(readAhead);
    return {
      start: (t, event) => {
        if (used) throw new Error('a sync slot is used once');
        used = true;
        const u = unborn(t, event);
        this.#unborn.set(t.ticket, u);
        const run = this.#executeNow(u);
        this.#now.set(t.ticket, run);
        void run.finally(() => {
          this.#now.delete(t.ticket);
          this.#unborn.delete(t.ticket);
          this.#slotsTaken--;
          dropReadAhead();
        });
        return { created: u.created, ran: run };
      },
      readAhead: (ticket, tenantId, intent) => {
        if (used || readAhead !== undefined) throw new Error('a sync slot reads ahead once, before it is used');
        readAhead = ticket;
        void this.memory.readAhead(ticket, tenantId, intent);
      },
    };
  }

  /** The claim a sync submission's ticket is created with when this core runs it at once (NowSlot.start). */
  claimNow(ticket: string): { owner: string; ms: number } {
    return { owner: `now-${ticket}`, ms: this.opts.leaseMs };
  }

  /** The ticket as its last commit left it, when this core finished it. */
  async #executeNow(u: Unborn): Promise<TicketRow | undefined> {
    const ticket = u.ticket.ticket;
    let last: TicketRow | undefined;
    try {
      last = await this.execute(ticket, this.claimNow(ticket).owner, this.#firstRow(u));
    } catch (error) {
      this.#log.warn({ err: error, ticket }, 'in-core execution stopped; the queue takes the ticket over');
    }
    // A pass that ended before its ticket was created creates it for the queue, which runs it from the start.
    if (!u.writing) {
      await this.#create(u, true).catch(() => undefined);
      return undefined;
    }
    if (u.outcome !== 'created') return undefined;
    const finished = last && FINISHED.includes(last.lifecycle_state) ? last : undefined;
    if (finished) return finished;
    await retryWhileUnavailable(async () => {
      const state = await getTicketState(this.#em(), ticket);
      if (state && !FINISHED.includes(state.lifecycle_state) && state.lifecycle_state !== 'WAIT_HUMAN') await this.#em().transactional((tx) => this.queue.enqueue(tx, ticket));
    }).catch((error: unknown) => this.#log.warn({ err: error, ticket }, 'could not queue the ticket; the recovery sweep does once its claim lapses'));
    return undefined;
  }

  /**
   * Runs (or resumes) one ticket's lifecycle until it finishes or waits for a
   * human; the ticket as this pass last committed it. `started` is the row of
   * a ticket created already claimed by `workerId` (see claimNow).
   */
  async execute(ticket: string, workerId: string, started?: TicketRow): Promise<TicketRow | undefined> {
    if (this.#stopping) return void (await this.#handBack(ticket));
    const abort = new AbortController();
    // Subscribed before the claim reads the row, so a cancel cannot slip between them.
    const offCancel = this.opts.bus.onCancel(ticket, () => abort.abort());
    const claimed = started ?? await this.#claim(ticket, workerId).catch((error: unknown) => {
      offCancel();
      throw error;
    });
    if (!claimed) return void offCancel();
    const letGo = this.queue.hold(ticket, workerId, () => {
      // A ticket not created yet has no claim to renew.
      const u = this.#unborn.get(ticket);
      if (!u || u.outcome !== undefined) abort.abort();
    });
    const done = this.#running.hold(ticket, abort);
    // This worker's pass over the ticket, in the ticket's trace; each phase is a child span.
    const { span, context } = startSpan(`contract ${claimed.contract_id}`, {
      attributes: { 'abc.ticket': ticket, 'abc.contract.id': claimed.contract_id, 'abc.contract.version': claimed.contract_version, 'abc.contract.from_state': claimed.lifecycle_state },
    }, contextInTrace(claimed.trace_id, claimed.traceparent));
    let last: TicketRow | undefined;
    try {
      last = await otel.with(context, () => this.#advance(claimed, abort.signal));
      if (abort.signal.reason === HAND_BACK) await this.#handBack(ticket);
      return last;
    } catch (error) {
      failSpan(span, error);
      // The database failing under the engine is the queue's to retry: the
      // next attempt resumes from the last committed transition.
      if (isInfrastructure(error)) throw error;
      if (abort.signal.reason === HAND_BACK) return void (await this.#handBack(ticket));
      // A ticket never created has nothing to fail: one whose pass ended first is created after it (#executeNow).
      if (this.#created(ticket)) await this.#fail(ticket, error);
    } finally {
      span.end();
      done();
      letGo();
      offCancel();
      // A finished ticket's last move gave its claim up.
      if (!last || !FINISHED.includes(last.lifecycle_state)) await this.queue.release(ticket, workerId);
    }
  }

  /** Queues a ticket again for whichever core takes it next (its current job then completes). */
  async #handBack(ticket: string): Promise<void> {
    if (!this.#created(ticket)) return;
    await this.#em().transactional((tx) => this.queue.enqueue(tx, ticket));
    this.#log.info({ ticket }, 'ticket handed back to the queue');
  }

  /** Whether the ticket exists: any but one a sync slot runs from before it was created, until it is. */
  #created(ticket: string): boolean {
    const u = this.#unborn.get(ticket);
    return !u || u.outcome === 'created';
  }

  /** The row a sync slot's pass starts from: the ticket as its creation will write it, started and claimed by this core. */
  #firstRow(u: Unborn): TicketRow {
    const row = createdRow(u.ticket, 'CONTEXT_BUILD', this.claimNow(u.ticket.ticket).owner);
    this.#unbornRows.set(row, u);
    return row;
  }

  /**
   * Creates a ticket a sync slot runs, alone, unless its creation is already
   * written: started and claimed by this core, or, `late`, after its pass
   * ended, in INIT with its admission's claim and a queue job. Undefined when
   * its idempotency key was taken.
   */
  #create(u: Unborn, late = false): Promise<TicketRow | undefined> {
    if (u.writing) return u.writing;
    const em = this.#em();
    return u.write(late ? this.queue.create(em, u.ticket, u.event) : insertTicket(em, u.ticket, { event: u.event, start: this.claimNow(u.ticket.ticket) }));
  }

  async #claim(ticket: string, workerId: string): Promise<TicketRow | undefined> {
    // A fresh ticket is claimed and started in one statement.
    const started = await transitionTicketFrom(this.#em(), ticket, 'INIT', 'start', { lease: { owner: workerId, ms: this.opts.leaseMs } }, 'worker');
    if (started) return started;
    return this.#em().transactional(async (tx) => {
      const row = await getTicket(tx, ticket, true);
      if (!row || FINISHED.includes(row.lifecycle_state)) return undefined;
      await this.queue.claim(tx, ticket, workerId);
      if (row.lifecycle_state === 'INIT') return this.#transition(tx, ticket, 'start', {}, 'worker');
      return row;
    });
  }

  /** Runs phase after phase from the row the claim committed; the ticket as its last phase committed it. */
  async #advance(claimed: TicketRow, signal: AbortSignal): Promise<TicketRow> {
    const ticket = claimed.ticket;
    let row = claimed;
    this.#passes.set(ticket, { context: otel.active() });
    try {
      for (;;) {
        // A cancelled pass still waits for a move going out: nothing of the ticket is read or released before it.
        if (signal.aborted) return await this.#committed(row).catch(() => row);
        if (FINISHED.includes(row.lifecycle_state)) return row;
        const current = row;
        const next = await this.#inPhase(ticket, row.lifecycle_state, () => this.#phase(current, signal)).catch(async (error: unknown) => {
          // A phase that failed before it took the row's move in flight still lets it settle first.
          await this.#committed(current).catch(() => undefined);
          throw error;
        });
        if (next === STOP) return row;
        row = next ?? (await getTicket(this.#em(), ticket))!;
      }
    } finally {
      this.#passes.delete(ticket);
    }
  }

  /** `fn` in the span of a phase of this pass: also a phase run ahead, within another's work, is a child of the pass. */
  #inPhase<T>(ticket: string, state: LifecycleState, fn: () => Promise<T>): Promise<T> {
    const parent = this.#passes.get(ticket)?.context;
    return inSpan(`contract.phase ${state}`, { attributes: { 'abc.ticket': ticket, 'abc.contract.phase': state }, ...(parent && { parent }) }, fn);
  }

  /**
   * Runs the phase the ticket is in. Answers the row as the phase committed it
   * (this worker holds the lease: no other writer moves it but a cancel, which
   * aborts the pass), null when it must be read again, or STOP when this pass
   * ends there (it waits for a human).
   */
  async #phase(row: TicketRow, signal: AbortSignal): Promise<TicketRow | null | typeof STOP> {
    const rec = recordOf(row);
    switch (row.lifecycle_state) {
      case 'CONTEXT_BUILD':
        return (await this.#buildContext(row, rec)) ?? null;
      case 'PLAN_GENERATION':
        return (await this.#generatePlan(row, rec)) ?? null;
      case 'PLAN_CHECK':
        return (await this.#checkPlan(row, rec)) ?? null;
      case 'REPLAN':
        await this.#replan(row, rec);
        return null;
      case 'EXECUTION_PREPARE':
        return this.#prepare(row, rec);
      case 'STEP_EXECUTION':
        return (await this.#executeBatch(row, rec, signal)) ?? null;
      case 'STEP_REVIEW':
        return (await this.#reviewBatch(row, rec)) ?? null;
      case 'ROLLBACK':
        await this.#rollback(row, rec);
        return null;
      case 'GLOBAL_REVIEW':
        return (await this.#reviewResult(row, rec)) ?? null;
      case 'PACKAGING':
        return this.#package(row, rec);
      case 'WAIT_HUMAN':
        await this.#checkHumanDeadline(row, rec);
        return STOP;
      default:
        return STOP;
    }
  }

  // ---- the phases --------------------------------------------------------

  /** CONTEXT_BUILD: the contract, the assembly, the policy settings, and what memory says about the intent. */
  async #buildContext(row: TicketRow, rec: ExecRecord): Promise<TicketRow | void | typeof STOP> {
    const unborn = this.#unbornRows.get(row);
    // Any other write than a first plan's commit goes after the ticket's creation; a taken idempotency key ends the pass.
    const created = async () => !unborn || (await this.#create(unborn)) !== undefined;
    const run = await this.#role('CONTEXT_BUILDER', row, rec, null, []);
    if (!run.output.success) return (await created()) ? this.#halt(row, rec, run.output.errors[0]!, [decisionEvent(run)]) : STOP;
    const data = run.output.data as { assembly: { assembly_id: string; version: string; engine?: Partial<EngineSettings> }; failure_counts: Record<string, number>; similar_successes: unknown[]; avoid: string[] };
    const next: ExecRecord = {
      ...rec,
      settings: settingsOf(data.assembly.engine, { max_active_steps: this.opts.stepConcurrency, ...this.opts.settings }),
      avoid: [...new Set([...rec.avoid, ...data.avoid])].sort(),
      hints: { failure_counts: data.failure_counts, similar_successes: data.similar_successes },
    };
    const pass = this.#passes.get(row.ticket);
    if (pass) pass.hints = frozen(next.hints);
    const built: ContextBuilt = { patch: { assembly_id: data.assembly.assembly_id, assembly_version: data.assembly.version }, trace: [decisionEvent(run)] };
    // With the built-in planner and critic (pure, and quick), a first plan commits with the context.
    if (!row.plan_id && this.#builtinOnly('PLANNER', next) && this.#builtinOnly('PLAN_CRITIC', next)) {
      const planned = await this.#inPhase(row.ticket, 'PLAN_GENERATION', () => this.#planAhead({ ...row, ...built.patch, lifecycle_state: 'PLAN_GENERATION', phase: 'plan' }, next, built, unborn));
      if (planned) return planned;
    }
    if (!(await created())) return STOP;
    return this.#move(row.ticket, 'context_built', next, built.patch, { trace: built.trace });
  }

  /**
   * The first plan of a context not committed yet: the context, the plan, its
   * approval and its preparation in one statement. Undefined, with nothing
   * written, unless the planner and the critic both pass it in one go; the
   * context then commits alone, and PLAN_GENERATION plans again. A ticket
   * not created yet is created by the same statement.
   */
  async #planAhead(row: TicketRow, rec: ExecRecord, built: ContextBuilt, unborn?: Unborn): Promise<TicketRow | undefined> {
    const draft = await this.#draft(row, rec);
    if (!draft.body || !draft.critique?.output.success) return undefined;
    return this.#prepareFirst(row, rec, draft.body, draft.hash, [decisionEvent(draft.run)], [decisionEvent(draft.critique)], built, unborn);
  }

  /** The planner's plan and, when the critic is the built-in alone (a pure check), its verdict. */
  async #draft(row: TicketRow, rec: ExecRecord): Promise<{ run: RoleRun; body?: undefined } | { run: RoleRun; body: PlanBody; hash: string; critique?: RoleRun }> {
    const run = await this.#role('PLANNER', row, rec, null, []);
    if (!run.output.success) return { run };
    const { body, hash } = plannerBody(run.output.data);
    const critique = this.#builtinOnly('PLAN_CRITIC', rec) ? await this.#role('PLAN_CRITIC', row, rec, { ...body, plan_id: '', plan_hash: hash, created_at: 0, metadata: {} }, []) : undefined;
    return { run, body, hash, ...(critique && { critique }) };
  }

  /**
   * PLAN_GENERATION: the planner's plan, frozen by the decision plane. When
   * the critic is the built-in alone (a pure check), its verdict is known
   * before the commit: generation, approval and preparation commit together.
   */
  async #generatePlan(row: TicketRow, rec: ExecRecord): Promise<TicketRow | void> {
    const draft = await this.#draft(row, rec);
    const run = draft.run;
    if (!draft.body) return this.#halt(row, rec, run.output.errors[0]!, [decisionEvent(run)]);
    const { body, hash, critique } = draft;
    if (critique?.output.success && !row.plan_id) {
      const prepared = await this.#prepareFirst(row, rec, body, hash, [decisionEvent(run)], [decisionEvent(critique)]);
      if (prepared) return prepared;
    }
    const [generated, prepared] = await this.#em().transactional(async (tx) => {
      const plan = await this.opts.decision.freeze(body, hash, row.ticket, planMetadata(row, body), undefined, tx);
      const generated = { plan_id: plan.plan_id, engine: { ...rec } };
      if (!critique?.output.success) return [await this.#transition(tx, row.ticket, 'plan_generated', generated, 'engine', { trace: [decisionEvent(run)] }), undefined];
      await this.#transition(tx, row.ticket, 'plan_approved', generated, 'engine', { from: 'PLAN_GENERATION', through: [{ trigger: 'plan_generated', trace: [decisionEvent(run)] }], trace: [decisionEvent(critique)] });
      return [undefined, await this.#prepareIn(tx, row, rec, plan)];
    });
    // A rejection the built-in critic already gave is acted on now, not asked for again.
    if (generated && critique) return this.#verdict(generated, rec, critique);
    return prepared ?? generated;
  }

  /**
   * A ticket's first plan (it has no steps yet), approved by the built-in
   * critic: frozen, approved and prepared (its step rows, their contracts, its
   * snapshot) in one statement; after `built`, the context it was planned in,
   * when that has not committed yet. Undefined when a step is planned skipped.
   * The row answered is the one the statement writes, while it goes out: the
   * first batch runs meanwhile, and nothing of it commits before (#committing).
   */
  async #prepareFirst(row: TicketRow, rec: ExecRecord, body: PlanBody, hash: string, generated: TicketEventInput[], approved: TicketEventInput[], built?: ContextBuilt, unborn?: Unborn): Promise<TicketRow | undefined> {
    const steps = await firstSteps(this.#em(), this.opts.capabilities.units, row, body);
    if (!steps) return undefined;
    const plan = this.opts.decision.frozen(body, hash, row.ticket, planMetadata(row, body));
    const planId = plan.doc.plan_id;
    const snapshot = snapshotOf(row.ticket, 'EXECUTION_PREPARE', `plan:${planId}`, planId, steps.rows, rec);
    const snapshotId = this.#remember(snapshot.row);
    const prepared = { ...built?.patch, plan_id: planId, engine: { ...rec, reset_steps: null, snapshot_id: snapshotId, base_snapshot_id: snapshotId } };
    const move = {
      through: [...(built ? [{ trigger: 'context_built' as const, trace: built.trace }] : []), { trigger: 'plan_generated' as const, trace: generated }, { trigger: 'plan_approved' as const, trace: approved }],
      trace: [snapshot.event],
      also: [plan.insert, ...steps.writes, snapshotsInsert([snapshot.row])],
    };
    const committing = unborn && built
      ? this.#createWith(unborn, prepared, move)
      : this.#transition(this.#em(), row.ticket, 'prepared', prepared, 'engine', { from: built ? 'CONTEXT_BUILD' : 'PLAN_GENERATION', ...move });
    const written = committing.then((committed) => this.#with(steps.rows, committed));
    // Whoever takes the row awaits the move (#committed); a failure is theirs, not unhandled.
    written.catch(() => undefined);
    const to = 'STEP_EXECUTION';
    const ahead: TicketRow = { ...row, ...prepared, lifecycle_state: to, phase: PHASE_OF[to] ?? row.phase, status: statusOf(to) };
    this.#committing.set(ahead, written);
    return this.#with(steps.rows, ahead);
  }

  /** A ticket created by the move that prepares its first plan, from INIT through its start; a taken idempotency key fails the move. */
  #createWith(u: Unborn, prepared: TicketPatch, move: Required<Pick<TicketMoveRecords, 'through' | 'trace' | 'also'>>): Promise<TicketRow> {
    const ticket = u.ticket.ticket;
    const start = { trigger: 'start' as const, trace: [u.event], actor: 'worker' };
    const created = u.write(createTicket(this.#em(), u.ticket, this.claimNow(ticket), 'prepared', prepared, 'engine', { ...move, through: [start, ...move.through] }));
    return created.then((row) => row ?? Promise.reject(new AbcError('ALREADY_EXISTS', { code: 'idempotency_conflict', message: `ticket ${ticket} was not created: its idempotency key is taken`, retryable: false })));
  }

  /** The row as committed: once the move that writes it has gone out, if it is still going. */
  async #committed(row: TicketRow): Promise<TicketRow> {
    const committing = this.#committing.get(row);
    if (!committing) return row;
    this.#committing.delete(row);
    return committing;
  }

  /** PLAN_CHECK: the critic's verdict; a repairable plan is replanned around its culprits. */
  async #checkPlan(row: TicketRow, rec: ExecRecord): Promise<TicketRow | void> {
    const plan = (await this.opts.decision.getPlan(row.plan_id!))!;
    return this.#verdict(row, rec, await this.#role('PLAN_CRITIC', row, rec, plan, []));
  }

  async #verdict(row: TicketRow, rec: ExecRecord, run: RoleRun): Promise<TicketRow | void> {
    if (run.output.success) return this.#move(row.ticket, 'plan_approved', rec, {}, { trace: [decisionEvent(run)] });
    const error = run.output.errors[0] ?? toStructured(new Error('the plan critic rejected the plan'));
    const policy = this.#policy(row, rec, { kind: 'failure', step_id: null, error });
    const trace = [decisionEvent(run), errorEvent(error), policyEvent(policy)];
    if (policy.action !== 'REPLAN' && policy.action !== 'RETRY') return this.#halt(row, rec, error, trace, policy.reason);
    const culprits = (error.metadata.avoid as string[] | undefined) ?? [];
    const next: ExecRecord = {
      ...withError(rec, error),
      iteration: rec.iteration + 1,
      consecutive_failures: rec.consecutive_failures + 1,
      avoid: [...new Set([...rec.avoid, ...culprits])].sort(),
      replan: { scope: policy.scope ?? 'GLOBAL', failed_step_id: null },
    };
    return this.#move(row.ticket, 'plan_rejected', next, {}, { trace, reason: policy.reason });
  }

  /** REPLAN: a successor plan (LOCAL: the failed subtree; GLOBAL: everything, latest assembly), frozen. */
  async #replan(row: TicketRow, rec: ExecRecord): Promise<void> {
    const previous = (await this.opts.decision.getPlan(row.plan_id!))!;
    const run = await this.#role('PLANNER', row, rec, previous, []);
    if (!run.output.success) return this.#halt(row, rec, run.output.errors[0]!, [decisionEvent(run)]);
    const { body, hash } = plannerBody(run.output.data);
    const replan = rec.replan ?? { scope: 'GLOBAL' as const, failed_step_id: null };
    const steps = await getSteps(this.#em(), row.ticket);
    const failed = steps.filter((s) => s.status === 'FAILED').map((s) => s.step_id);
    const reset = stepsToReset(replan.scope, body.steps, replan.failed_step_id, failed);
    const next: ExecRecord = {
      ...rec,
      replan: null,
      reset_steps: reset,
      ...(replan.scope === 'LOCAL' && replan.failed_step_id
        ? { local_replans: { ...rec.local_replans, [replan.failed_step_id]: (rec.local_replans[replan.failed_step_id] ?? 0) + 1 } }
        : { global_replans: rec.global_replans + 1 }),
    };
    await this.#em().transactional(async (tx) => {
      const plan = await this.opts.decision.freeze(body, hash, row.ticket, { ...previous.metadata, replan: { ...replan, avoid: rec.avoid }, avoided: avoidedOf(body) }, previous.plan_id, tx);
      await this.#transition(tx, row.ticket, 'replanned', { plan_id: plan.plan_id, engine: { ...next } }, 'engine', {
        trace: [decisionEvent(run), { type: 'PLAN_REPLACED', payload: { scope: replan.scope, from_plan_id: previous.plan_id, to_plan_id: plan.plan_id, reset_steps: reset, avoid: rec.avoid } }],
        reason: `${replan.scope} replan`,
      });
    });
  }

  /** EXECUTION_PREPARE: step rows match the plan, and a snapshot marks where a GLOBAL rollback returns. */
  async #prepare(row: TicketRow, rec: ExecRecord): Promise<TicketRow> {
    const plan = (await this.opts.decision.getPlan(row.plan_id!))!;
    return this.#em().transactional((tx) => this.#prepareIn(tx, row, rec, plan));
  }

  async #prepareIn(tx: EntityManager, row: TicketRow, rec: ExecRecord, plan: FrozenPlanDoc): Promise<TicketRow> {
    const steps = await syncSteps(tx, this.opts.capabilities.units, row, plan, rec.reset_steps);
    const snapshot = snapshotOf(row.ticket, 'EXECUTION_PREPARE', `plan:${plan.plan_id}`, plan.plan_id, steps, rec);
    const snapshotId = this.#remember(snapshot.row);
    return this.#with(steps, await this.#transition(tx, row.ticket, 'prepared', { engine: { ...rec, reset_steps: null, snapshot_id: snapshotId, base_snapshot_id: snapshotId } }, 'engine', { trace: [snapshot.event], also: [snapshotsInsert([snapshot.row])] }));
  }

  /**
   * STEP_EXECUTION: the next batch of ready steps, in parallel; or the end of
   * the plan; or a wait for a human. Steps that finished since the last passed
   * review (a crash between a batch and its review) are reviewed first. With
   * the built-in reviewer alone, a batch that passes commits its settling and
   * its review together; and when its steps' ends were held for it and the
   * batch settled within ABC_STEP_START_DEFER_MS of the first such review, the
   * next batch runs at once and that review goes out with the next one's, in
   * one statement (`chain`). Nothing of the next batch commits before it: a
   * commit it asks for, or the end of that time, writes the chain first. So
   * with the plan's move, when the first batch runs while it goes out.
   */
  async #executeBatch(claimed: TicketRow, rec: ExecRecord, signal: AbortSignal, chain: Chain = NO_CHAIN): Promise<TicketRow | void> {
    let row = claimed;
    const committing = this.#committing.get(claimed);
    const plan = (await this.opts.decision.getPlan(row.plan_id!))!;
    const settings = rec.settings ?? settingsOf(undefined, { max_active_steps: this.opts.stepConcurrency });
    const steps = chain.steps ?? (await this.#stepsOf(row));
    const unreviewed = await this.#unreviewed(rec, steps);
    let flushed: Promise<TicketRow> | undefined;
    const flush = chain.reviews.length ? () => (flushed ??= this.#withHeld(chain.reviews, (c) => this.#passReview(this.#em(), claimed, c, true))) : undefined;
    const due = flush && setTimeout(() => void flush().catch(() => undefined), Math.max(0, chain.since + this.opts.stepStartDeferMs - Date.now()));
    const before = committing ? () => committing : flush;
    let view: EngineContextView | undefined;
    const outcome = await runBatch({
      row,
      steps,
      rec,
      plan,
      settings,
      startDeferMs: this.opts.stepStartDeferMs,
      signal,
      em: this.#em,
      db: this.opts.db,
      llm: this.opts.llm,
      capabilities: this.opts.capabilities,
      policy: this.opts.policy(row.tenant_id),
      output: await this.#output(row),
      log: this.#log,
      memory: this.memory,
      global: this.#global(row, rec),
      // One frozen view for the whole batch: the state agents read does not change within it.
      executor: async (ctx) => this.#roleIn('STEP_EXECUTOR', row, rec, (view ??= await this.#view(row, rec, plan, steps)), ctx),
      ...(unreviewed.length && { unreviewed }),
      ...(before && { before }),
      announce: this.#announce,
    }).finally(() => clearTimeout(due));
    if (committing) {
      this.#committing.delete(claimed);
      const written = await committing.then((committed) => ({ committed }), (error: unknown) => ({ error }));
      if (!('committed' in written)) {
        if (outcome.kind === 'aborted') return;
        throw written.error;
      }
      row = written.committed;
    }
    if (outcome.kind === 'aborted') {
      // Cancelled: the chain's reviews never go out, its steps' ends do (if their rows were not skipped).
      if (flushed) await flushed.catch(() => undefined);
      else for (const p of chain.reviews) await p.step?.held.write();
      return;
    }
    if (flushed) row = await flushed;
    // The chain not written yet goes out first (once), unless this batch's review takes it along.
    const writeChain = async () => {
      if (flush) row = await flush();
    };
    if (outcome.kind !== 'settled') await writeChain();
    if (outcome.kind === 'done') return this.#with(steps, await this.#move(row.ticket, 'all_steps_done', { ...rec, batch: null }));
    if (outcome.kind === 'stuck') return this.#halt(row, rec, outcome.error, []);
    if (outcome.kind === 'human') return this.#awaitHuman(row, rec, { kind: 'step_approval', stepId: outcome.stepId, reason: outcome.reason, step: outcome.step }, [policyEvent(outcome.policy)]);
    const settled: ExecRecord = { ...rec, batch: outcome.batch, errors: [...rec.errors, ...Object.values(outcome.batch.failures)].slice(-50) };
    const held = outcome.held;
    if (this.#builtinOnly('REVIEWER', rec) && !Object.keys(outcome.batch.failures).length) {
      const after = outcome.after;
      const review = await this.#reviewSteps(row, settled, plan, after);
      if (!review.problem) {
        const passed = this.#passed(row, settled, after, review.trace, held);
        const reviews = [...(flushed ? [] : chain.reviews), passed];
        // The plan's last batch: a result the built-in reviewer passes is packaged in the same statement.
        const packaged = allDone(after) && (await this.#inPhase(row.ticket, 'GLOBAL_REVIEW', async () => {
          const result = await this.#passedResult({ ...row, lifecycle_state: 'GLOBAL_REVIEW', phase: 'aggregate' }, passed.rec, plan, after);
          return result && this.#withHeld(reviews, (c) => this.#packageIn(this.#em(), row, passed.rec, after, result, c));
        }));
        if (packaged) return this.#with(after, packaged);
        const since = reviews.length > 1 ? chain.since : Date.now();
        if (passed.step && !allDone(after) && Date.now() - since < this.opts.stepStartDeferMs && !signal.aborted) {
          return this.#executeBatch(row, passed.rec, signal, { reviews, since, steps: after });
        }
        return this.#with(after, await this.#withHeld(reviews, (c) => this.#passReview(this.#em(), row, c, true)));
      }
    }
    await writeChain();
    await held?.write();
    return this.#move(row.ticket, 'steps_settled', settled);
  }

  /**
   * A move with passed reviews, their held step ends written first in its
   * statement; when one of those steps has moved on meanwhile (a cancel), the
   * ends commit on their own, as they would have, and the move goes without
   * them.
   */
  async #withHeld<T>(reviews: PassedReview[], move: (reviews: PassedReview[]) => Promise<T>): Promise<T> {
    if (!reviews.some((p) => p.step)) return move(reviews);
    try {
      return await move(reviews);
    } catch (error) {
      if (!isGuardRefusal(error)) throw error;
      for (const p of reviews) await p.step?.held.write();
      return move(reviews.map((p) => ({ ...p, step: undefined })));
    }
  }

  /** Finished steps the last passed review (its snapshot) has not seen. */
  async #unreviewed(rec: ExecRecord, steps: StepRow[]): Promise<string[]> {
    if (!rec.snapshot_id) return [];
    const snapshot = await this.#snapshot(rec.snapshot_id);
    return steps.filter((s) => (s.status === 'SUCCEEDED' || s.status === 'FAILED') && snapshot?.steps[s.step_id]?.status !== s.status).map((s) => s.step_id);
  }

  /** Snapshots never change: each is read once, or not at all by the core that wrote it. */
  async #snapshot(id: string): Promise<SnapshotContent | undefined> {
    const found = this.#snapshots.get(id) ?? (await restoreSnapshot(this.#em(), id));
    if (found) this.#remember({ snapshotId: id, content: found });
    return found;
  }

  /** Keeps a snapshot this core wrote or read (an id is never reused, so one rolled back is never asked for). */
  #remember(snapshot: { snapshotId: string; content: SnapshotContent }): string {
    if (!this.#snapshots.has(snapshot.snapshotId) && this.#snapshots.size >= 1000) this.#snapshots.delete(this.#snapshots.keys().next().value!);
    this.#snapshots.set(snapshot.snapshotId, snapshot.content);
    return snapshot.snapshotId;
  }

  /** STEP_REVIEW: each step of the batch against its schema and the confidence threshold; failures go to the policy. */
  async #reviewBatch(row: TicketRow, rec: ExecRecord): Promise<TicketRow | void> {
    const batch = rec.batch ?? NO_BATCH;
    const plan = (await this.opts.decision.getPlan(row.plan_id!))!;
    const steps = await getSteps(this.#em(), row.ticket);
    const { trace, problem } = await this.#reviewSteps(row, rec, plan, steps);
    if (!problem) return this.#passReview(this.#em(), row, [this.#passed(row, rec, steps, trace)]);
    const ephemeral = batch.steps.map((id) => `${row.ticket}:${id}`);
    const input = problem.error ? ({ kind: 'failure', step_id: problem.stepId, error: problem.error } as const) : ({ kind: 'low_confidence', step_id: problem.stepId, confidence: problem.confidence! } as const);
    const policy = this.#policy(row, rec, input);
    const error = problem.error ?? toStructured(new AbcError('FAILED_PRECONDITION', { code: 'LOW_CONFIDENCE', category: 'EXECUTION', message: policy.reason ?? 'low confidence', retryable: false }), { step_id: problem.stepId });
    trace.push(errorEvent(error), policyEvent(policy));
    const capability = plan.steps.find((s) => s.id === problem!.stepId)?.tool_name ?? 'unknown';
    await this.memory.recordFailurePattern(row.tenant_id, { intent: String(requestOf(row).intent), capability, code: error.code, message: error.message.slice(0, 200), ...(error.suggested_action && { suggested_action: error.suggested_action }) });
    await this.memory.clear(row.tenant_id, 'EPHEMERAL', ephemeral);
    const failed: ExecRecord = { ...withError(rec, error), consecutive_failures: rec.consecutive_failures + 1, batch: null };
    switch (policy.action) {
      case 'RETRY': {
        // Failed steps run again; so does a step whose output failed its review, unless its side effects already happened.
        const retried = steps.filter((s) => batch.steps.includes(s.step_id) && (s.status === 'FAILED' || (s.step_id === problem!.stepId && s.status === 'SUCCEEDED' && !s.side_effect)));
        const attempts = { ...rec.attempts };
        for (const s of retried) attempts[s.step_id] = (attempts[s.step_id] ?? 0) + 1;
        await this.#em().transactional(async (tx) => {
          for (const s of retried) {
            const message = `retry ${attempts[s.step_id]}: ${batch.failures[s.step_id]?.message ?? error.message}`.slice(0, 500);
            await transitionStep(tx, row.ticket, s.step_id, s.status === 'FAILED' ? 'retry' : 'reset', { message });
          }
          await this.#transition(tx, row.ticket, 'retry', { engine: { ...failed, attempts, iteration: rec.iteration + 1 } }, 'engine', { trace, reason: policy.reason });
        });
        return;
      }
      case 'REPLAN': {
        const avoid = error.retryable ? rec.avoid : [...new Set([...rec.avoid, capability])].sort();
        return this.#move(row.ticket, 'replan', { ...failed, iteration: rec.iteration + 1, avoid, replan: { scope: policy.scope ?? 'LOCAL', failed_step_id: problem.stepId } }, {}, { trace, reason: policy.reason });
      }
      case 'ROLLBACK':
        return this.#move(row.ticket, 'rollback', { ...failed, iteration: rec.iteration + 1, rollback: { scope: policy.scope ?? 'LOCAL', failed_step_id: problem.stepId } }, {}, { trace, reason: policy.reason });
      case 'WAIT_HUMAN':
        return this.#awaitHuman(row, failed, { kind: 'low_confidence', stepId: problem.stepId, reason: policy.reason ?? 'low confidence' }, trace);
      default:
        return this.#halt(row, rec, error, trace, policy.reason);
    }
  }

  /** The reviewer's verdict on each step of the batch, and the first problem. */
  async #reviewSteps(row: TicketRow, rec: ExecRecord, plan: FrozenPlanDoc, steps: StepRow[]): Promise<{ trace: TicketEventInput[]; problem?: { stepId: string; error?: StructuredError; confidence?: number } }> {
    const batch = rec.batch ?? NO_BATCH;
    const settings = rec.settings ?? DEFAULT_SETTINGS;
    const trace: TicketEventInput[] = [];
    let problem: { stepId: string; error?: StructuredError; confidence?: number } | undefined;
    const view = await this.#view(row, rec, plan, steps);
    const pass: Pass = this.#passes.get(row.ticket) ?? {};
    for (const id of batch.steps) {
      const step = steps.find((s) => s.step_id === id)!;
      if (step.status === 'FAILED') {
        problem ??= { stepId: id, error: batch.failures[id] ?? toStructured(new Error(step.message ?? 'the step failed'), { step_id: id }) };
        continue;
      }
      if (step.status !== 'SUCCEEDED') continue;
      const planned = plan.steps.find((s) => s.id === id)!;
      // The plan's input and the committed output never change: the frozen copies the views share.
      const ctx: StepContext = { step_id: id, tool_input: frozenOnce(planned.input), tool_output: frozenOutput(pass, step), validation_flags: {}, ...(step.started_at && { start_time: new Date(step.started_at).toISOString() }), ...(step.ended_at && { end_time: new Date(step.ended_at).toISOString() }) };
      const run = await this.#roleIn('REVIEWER', row, rec, view, ctx);
      trace.push(decisionEvent(run, id));
      if (!run.output.success) problem ??= { stepId: id, error: run.output.errors[0] ?? toStructured(new Error('the reviewer rejected the output'), { step_id: id }) };
      else if (run.output.confidence < settings.confidence_threshold && !rec.approved_steps.includes(id)) problem ??= { stepId: id, confidence: run.output.confidence };
    }
    return { trace, ...(problem && { problem }) };
  }

  /**
   * A passed review: the batch's step contexts end, a snapshot marks what is
   * reviewed, and execution goes on; all in one statement, with the batch's
   * settling first when `settle` (a review that was known before it).
   */
  async #passReview(em: EntityManager, row: TicketRow, reviews: PassedReview[], settle = false): Promise<TicketRow> {
    const last = reviews.at(-1)!;
    const partial = reviews.findLast((p) => p.step)?.step!.held.commits.at(-1)!.partialResult;
    return this.#transition(em, row.ticket, 'review_passed', { engine: { ...last.rec }, ...(partial && { partial_result: partial }) }, 'engine', {
      trace: last.trace,
      // Settling first, each batch's hops up to the last review's own.
      ...(settle ? { from: 'STEP_EXECUTION', through: settledHops(reviews).slice(0, -1) } : { from: 'STEP_REVIEW' }),
      also: reviewRecords(row, reviews),
    });
  }

  /**
   * What a batch's passed review writes: the record after it, its hop's trace,
   * its records (a snapshot; the batch's step contexts cleared) and, first,
   * the batch's `held` step ends.
   */
  #passed(row: TicketRow, rec: ExecRecord, steps: StepRow[], trace: TicketEventInput[], held?: HeldSteps): PassedReview {
    const batch = rec.batch ?? NO_BATCH;
    const snapshot = snapshotOf(row.ticket, 'STEP_REVIEW', `batch:${batch.id}`, row.plan_id, steps, rec);
    const consecutive = batch.catch_up ? rec.consecutive_failures : 0;
    return {
      rec: { ...rec, batch: null, consecutive_failures: consecutive, snapshot_id: this.#remember(snapshot.row) },
      trace: [snapshot.event, ...trace],
      ephemeral: batch.steps.map((id) => `${row.ticket}:${id}`),
      snapshot: snapshot.row,
      // A step's context would be cleared by the same statement that writes it: it is not written.
      ...(held && { step: { held, commits: held.commits.map((c) => ({ ...c, memory: c.memory?.filter((m) => m.scope !== 'EPHEMERAL') })) } }),
    };
  }

  /**
   * ROLLBACK: back to a snapshot (LOCAL: the last reviewed batch; GLOBAL: the
   * prepared plan). Steps that succeeded since are put back, except those with
   * side effects: they are kept, never replayed.
   */
  async #rollback(row: TicketRow, rec: ExecRecord): Promise<void> {
    const scope = rec.rollback?.scope ?? 'LOCAL';
    const snapshotId = scope === 'GLOBAL' ? rec.base_snapshot_id : rec.snapshot_id;
    const snapshot = snapshotId ? await this.#snapshot(snapshotId) : undefined;
    if (!snapshot) return this.#halt(row, rec, toStructured(new AbcError('FAILED_PRECONDITION', { code: 'NO_SNAPSHOT', category: 'EXECUTION', message: `no ${scope} snapshot to roll back to`, retryable: false })), []);
    await this.#em().transactional(async (tx) => {
      const reset: string[] = [];
      const kept: string[] = [];
      for (const step of await getSteps(tx, row.ticket)) {
        const then = snapshot.steps[step.step_id]?.status ?? 'PENDING';
        if (step.status === then || step.status === 'PENDING' || then !== 'PENDING') continue;
        if (step.status === 'SUCCEEDED' && step.side_effect) {
          kept.push(step.step_id);
          continue;
        }
        if (step.status === 'RUNNING') continue;
        await transitionStep(tx, row.ticket, step.step_id, 'reset', { message: `rolled back to ${snapshot.label}` });
        reset.push(step.step_id);
      }
      const next: ExecRecord = { ...rec, ...snapshot.record, rollback: null, batch: null, snapshot_id: snapshotId };
      await this.#transition(tx, row.ticket, 'restored', { engine: { ...next } }, 'engine', {
        trace: [{ type: 'SNAPSHOT_RESTORED', payload: { snapshot_id: snapshotId, label: snapshot.label, scope, reset_steps: reset, kept_steps: kept, kept_reason: 'side effects already happened; never replayed' } }],
        reason: `${scope} rollback to ${snapshot.label}`,
      });
    });
  }

  /** GLOBAL_REVIEW: the aggregate against the contract's result schema (and a configured reviewer's confidence). */
  async #reviewResult(row: TicketRow, rec: ExecRecord): Promise<TicketRow | void> {
    const steps = await this.#stepsOf(row);
    const patch = await this.#resultOf(row, steps);
    const result = patch.result;
    if (rec.accepted_result) return this.#with(steps, await this.#move(row.ticket, 'review_passed', rec, patch, { reason: 'a human accepted the result', from: 'GLOBAL_REVIEW' }));
    const plan = (await this.opts.decision.getPlan(row.plan_id!))!;
    const run = await this.#role('REVIEWER', row, rec, plan, steps, undefined, result);
    const trace = [decisionEvent(run)];
    if (passes(run, rec)) {
      if (!this.#builtinOnly('REVIEWER', rec)) return this.#with(steps, await this.#move(row.ticket, 'review_passed', rec, patch, { trace, from: 'GLOBAL_REVIEW' }));
      // The built-in's verdict is final: review and packaging commit together.
      return this.#packageIn(this.#em(), row, rec, steps, { patch, trace });
    }
    if (!run.output.success) {
      const error = run.output.errors[0]!;
      if (error.code === 'RESULT_SCHEMA_VIOLATION') this.#log.error({ ticket: row.ticket, violations: error.metadata.violations }, 'result breaks the contract result schema');
      const policy = this.#policy(row, rec, { kind: 'failure', step_id: null, error });
      trace.push(errorEvent(error), policyEvent(policy));
      if (policy.action === 'REPLAN' || policy.action === 'RETRY') {
        return this.#move(row.ticket, 'replan', { ...withError(rec, error), consecutive_failures: rec.consecutive_failures + 1, iteration: rec.iteration + 1, replan: { scope: 'GLOBAL', failed_step_id: null } }, {}, { trace, reason: policy.reason });
      }
      return this.#halt(row, rec, error, trace, policy.reason);
    }
    const policy = this.#policy(row, rec, { kind: 'low_confidence', step_id: null, confidence: run.output.confidence });
    trace.push(policyEvent(policy));
    if (policy.action === 'WAIT_HUMAN') return this.#awaitHuman(row, { ...rec, consecutive_failures: rec.consecutive_failures + 1 }, { kind: 'result', stepId: null, reason: policy.reason ?? 'low confidence' }, trace);
    if (policy.action === 'REPLAN') return this.#move(row.ticket, 'replan', { ...rec, consecutive_failures: rec.consecutive_failures + 1, iteration: rec.iteration + 1, replan: { scope: 'GLOBAL', failed_step_id: null } }, {}, { trace, reason: policy.reason });
    return this.#halt(row, rec, toStructured(new AbcError('FAILED_PRECONDITION', { code: 'LOW_CONFIDENCE', category: 'EXECUTION', message: policy.reason ?? 'low confidence', retryable: false })), trace, policy.reason);
  }

  /**
   * The result's review by the built-in reviewer alone, on steps all done: the
   * patch and trace of its pass; undefined when it does not pass (the
   * GLOBAL_REVIEW phase then reviews it again and answers) or when a human
   * accepted the result or another reviewer judges after the built-in.
   */
  async #passedResult(row: TicketRow, rec: ExecRecord, plan: FrozenPlanDoc, steps: StepRow[]): Promise<ReviewedResult | undefined> {
    if (rec.accepted_result || !this.#builtinOnly('REVIEWER', rec)) return undefined;
    const patch = await this.#resultOf(row, steps);
    const run = await this.#role('REVIEWER', row, rec, plan, steps, undefined, patch.result);
    return passes(run, rec) ? { patch, trace: [decisionEvent(run)] } : undefined;
  }

  /** The result the succeeded steps aggregate to, with its warnings. */
  async #resultOf(row: TicketRow, steps: StepRow[]): Promise<TicketPatch & { result: unknown }> {
    const done = succeeded(steps);
    const { result, warnings } = (await this.#output(row)).aggregate(row.request, outputsOf(done));
    // A step that finished by another path (its fallback) says so.
    const notes = done.filter((s) => s.message).map((s) => `${s.step_id}: ${s.message}`);
    return { result, warnings: [...warnings, ...notes] };
  }

  /** PACKAGING: the artifact, and the success remembered (GLOBAL) for later planners. */
  async #package(row: TicketRow, rec: ExecRecord): Promise<TicketRow> {
    return this.#packageIn(this.#em(), row, rec, await this.#stepsOf(row));
  }

  /**
   * The packaging move, with the success it remembers; in the same statement,
   * first `review`, the result's passed review, and before it `batches`, the
   * last batches' passed reviews (settled, reviewed, then all steps done).
   */
  async #packageIn(em: EntityManager, row: TicketRow, rec: ExecRecord, steps: StepRow[], review?: ReviewedResult, batches: PassedReview[] = []): Promise<TicketRow> {
    const result = review?.patch.result ?? row.result!;
    const artifact = (await this.#output(row)).render(row.request, result, outputsOf(steps));
    const plan = row.plan_id ? await this.opts.decision.getPlan(row.plan_id, em) : undefined;
    const intent = String(requestOf(row).intent);
    const success = memoryRow(
      row.tenant_id,
      successKey(intent, row.ticket),
      {
        type: 'success',
        intent,
        ticket: row.ticket,
        assembly: `${row.assembly_id}@${row.assembly_version}`,
        plan_id: row.plan_id,
        capabilities: plan?.steps.filter((s) => !s.skipped).map((s) => s.tool_name) ?? [],
        iterations: rec.iteration,
        duration_ms: Date.now() - new Date(row.created_at).getTime(),
      },
      'GLOBAL',
      'global',
      ['success', intent],
    );
    const settled = batches.length ? [...settledHops(batches), { trigger: 'all_steps_done' as const }] : [];
    return this.#transition(em, row.ticket, 'packaged', { ...review?.patch, artifact: artifact.content, artifact_media_type: artifact.mediaType, partial_result: null, engine: { ...rec } }, 'engine', {
      ...(review && { from: batches.length ? 'STEP_EXECUTION' : 'GLOBAL_REVIEW', through: [...settled, { trigger: 'review_passed', trace: review.trace }] }),
      also: [...reviewRecords(row, batches), ...successCaseWrite(success, intent)],
    });
  }

  // ---- WAIT_HUMAN (human.ts) -------------------------------------------------

  async #awaitHuman(row: TicketRow, rec: ExecRecord, ask: HumanAsk, trace: TicketEventInput[]): Promise<void> {
    await this.#em().transactional((tx) => awaitHuman(tx, this.queue, row, rec, ask, trace));
  }

  async #checkHumanDeadline(row: TicketRow, rec: ExecRecord): Promise<void> {
    await this.#em().transactional((tx) => checkHumanDeadline(tx, this.queue, row, rec));
  }

  /**
   * submit_human_feedback: continues a WAIT_HUMAN execution (continue, replan
   * or reject). Durable: the feedback, the transition and the queue job that
   * resumes it commit together.
   */
  async submitHumanFeedback(ticket: string, input: Omit<HumanFeedback, 'at'>): Promise<TicketRow> {
    return this.#em().transactional((tx) => answerHuman(tx, this.queue, this.memory, ticket, input));
  }

  /** Cancels an unfinished execution; the worker running it stops its steps. */
  async cancel(tx: EntityManager, ticket: string): Promise<TicketRow> {
    const before = (await getTicket(tx, ticket, true))!;
    const row = await this.#transition(tx, ticket, 'cancel', { human_deadline: null }, 'caller');
    await withdrawHuman(tx, before, recordOf(before));
    await skipPending(tx, ticket, 'not run: the ticket was cancelled');
    return row;
  }

  // ---- helpers ---------------------------------------------------------------

  /** How this execution's result and artifact are built (its assembly's pack, or its declarative output). */
  async #output(row: TicketRow) {
    const assembly: AssemblyDef | undefined = row.assembly_id && row.assembly_version ? await this.opts.decision.get(row.tenant_id, row.assembly_id, row.assembly_version) : undefined;
    return this.opts.outputs.of(assembly);
  }

  #global(row: TicketRow, rec: ExecRecord): GlobalState {
    const pass: Pass = this.#passes.get(row.ticket) ?? {};
    return frozen({
      execution_id: row.ticket,
      original_goal: (pass.goal ??= frozen(goalOf(row.request as unknown as PlanInput))),
      lifecycle_state: row.lifecycle_state,
      iteration_count: rec.iteration,
      trace_id: row.trace_id,
      created_at: new Date(row.created_at).toISOString(),
    });
  }

  /** The read-only context an agent sees. */
  async #view(row: TicketRow, rec: ExecRecord, plan: FrozenPlanDoc | null, steps: StepRow[], resultCandidate?: unknown): Promise<EngineContextView> {
    const assembly = row.assembly_id && row.assembly_version ? ((await this.opts.decision.get(row.tenant_id, row.assembly_id, row.assembly_version)) ?? null) : null;
    const pass: Pass = this.#passes.get(row.ticket) ?? {};
    return frozen({
      tenant_id: row.tenant_id,
      // Stored assemblies and frozen plans never change: each is frozen once and shared by every view.
      current_plan: plan && { plan_id: plan.plan_id, plan_hash: plan.plan_hash, assembly_id: plan.assembly_id, assembly_version: plan.assembly_version, steps: frozenOnce(plan.steps), whitelist: plan.whitelist.map((c) => c.name) },
      active_steps: Object.fromEntries(steps.map((s) => [s.step_id, s.status])),
      current_batch_id: rec.batch?.id ?? null,
      replan_scope: rec.replan?.scope ?? null,
      // A committed step's output never changes: frozen once, shared by the views of the pass.
      intermediate_results: Object.fromEntries(succeeded(steps).map((s) => [s.step_id, frozenOutput(pass, s)])),
      errors: rec.errors.map((e) => `${e.code}: ${e.message}`),
      snapshot_id: rec.snapshot_id,
      request: (pass.request ??= frozen(row.request)),
      assembly: assembly && frozenOnce(assembly),
      avoid: rec.avoid,
      replan: rec.replan,
      memory_hints: (pass.hints ??= frozen(rec.hints)),
      human_feedback: rec.feedback.map((f) => ({ action: f.action, feedback: f.feedback, at: f.at })),
      ...(resultCandidate !== undefined && { result_candidate: resultCandidate }),
    });
  }

  async #role(role: AgentRole, row: TicketRow, rec: ExecRecord, plan: FrozenPlanDoc | null, steps: StepRow[], step?: StepContext, resultCandidate?: unknown): Promise<RoleRun> {
    return this.#roleIn(role, row, rec, await this.#view(row, rec, plan, steps, resultCandidate), step);
  }

  /** Runs a role on a view already built; an agent's bug is a failed answer, not a crash of the engine. */
  async #roleIn(role: AgentRole, row: TicketRow, rec: ExecRecord, view: EngineContextView, step?: StepContext): Promise<RoleRun> {
    try {
      return await this.roles.run(role, rec.settings?.roles[role], this.#global(row, rec), view, step && frozen(step), row.tenant_id);
    } catch (error) {
      if (isInfrastructure(error) || AbcError.from(error).payload.category !== 'INTERNAL') throw error;
      this.#log.error({ err: error, role, ticket: row.ticket }, 'agent failed');
      return { output: { success: false, confidence: 0, errors: [toStructured(error, { role })], role }, agents: [`builtin.${role.toLowerCase()}`] };
    }
  }

  /** Whether a role is the built-in alone (no LLM or agent configured to judge after it). */
  #builtinOnly(role: AgentRole, rec: ExecRecord): boolean {
    return !this.roles.bound(rec.settings?.roles[role]);
  }

  #policy(row: TicketRow, rec: ExecRecord, input: Parameters<typeof evaluateTransition>[3]): PolicyDecision {
    return evaluateTransition(this.#global(row, rec), rec, rec.settings ?? DEFAULT_SETTINGS, input);
  }

  /** Notes the steps committed with `row`. */
  #with(steps: StepRow[], row: TicketRow): TicketRow {
    this.#stepsWith.set(row, steps);
    return row;
  }

  /** The ticket's steps: as committed with `row`, or read. */
  async #stepsOf(row: TicketRow): Promise<StepRow[]> {
    return this.#stepsWith.get(row) ?? getSteps(this.#em(), row.ticket);
  }

  async #move(ticket: string, trigger: LifecycleTrigger, rec: ExecRecord, patch: TicketPatch = {}, opts: { trace?: TicketEventInput[]; reason?: string; from?: LifecycleState } = {}): Promise<TicketRow> {
    return this.#transition(this.#em(), ticket, trigger, { ...patch, engine: { ...rec } }, 'engine', opts);
  }

  /** HALT: the execution fails with the error that stopped it. */
  async #halt(row: TicketRow, rec: ExecRecord, error: StructuredError, trace: TicketEventInput[], reason?: string): Promise<void> {
    const doc = haltError(error, row.trace_id, reason);
    await this.#em().transactional(async (tx) => {
      await skipPending(tx, row.ticket);
      await this.#transition(tx, row.ticket, 'halt', { error: { ...doc }, engine: { ...withError(rec, error) } }, 'engine', { trace: trace.some((t) => t.type === 'ERROR_OCCURRED') ? trace : [...trace, errorEvent(error)], reason: reason ?? error.code });
    });
  }

  /** An exception that escaped a phase: recorded as a StructuredError, and the execution fails (unless it already finished). */
  async #fail(ticket: string, thrown: unknown): Promise<void> {
    const e = AbcError.from(thrown);
    if (e.payload.category === 'INTERNAL') this.#log.error({ err: thrown, ticket }, 'execution failed');
    await this.#em().transactional(async (tx) => {
      const row = await getTicket(tx, ticket, true);
      if (!row || FINISHED.includes(row.lifecycle_state)) return;
      await skipPending(tx, ticket);
      await this.#transition(tx, ticket, 'halt', { error: errorDocument(e, row.trace_id), engine: { ...withError(recordOf(row), toStructured(thrown)) } }, 'engine', {
        trace: [errorEvent(toStructured(thrown))],
        reason: e.payload.code,
      });
    });
  }
}

/** The planner's data as a plan body. */
function plannerBody(data: unknown): PlannerData {
  const d = data as Partial<PlannerData> | undefined;
  if (d?.body && d.hash) return d as PlannerData;
  throw new AbcError('INTERNAL', { code: 'PLANNER_BAD_OUTPUT', category: 'EXECUTION', message: 'the planner answered no plan', retryable: true });
}

export const avoidedOf = (body: PlanBody) => body.steps.filter((s) => s.avoided).map((s) => ({ step_id: s.id, avoided: s.avoided, used: s.tool_name }));

const requestOf = (row: TicketRow) => row.request as Record<string, unknown> & { intent: string };

/**
 * Errors of the database connection or of concurrency (lost connection, admin
 * shutdown, too many clients, serialization failure, deadlock), which a later
 * attempt may not meet. A bad query is a bug, not one of these.
 */
function isInfrastructure(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && /^(ECONN|EPIPE|ETIMEDOUT|08|53|57P|40001|40P01)/.test(code);
}

/** What a ticket's first plan records of where it came from. */
const planMetadata = (row: TicketRow, body: PlanBody) => ({ input: planInput(row.request as unknown as PlanInput), avoided: avoidedOf(body), tenant_id: row.tenant_id });

/** Outputs of the succeeded steps, by step id. */
export const outputsOf = (steps: StepRow[]): Record<string, unknown> => Object.fromEntries(succeeded(steps).map((s) => [s.step_id, s.output]));

const succeeded = (steps: StepRow[]) => steps.filter((s) => s.status === 'SUCCEEDED');

/** Whether every step of the plan has run: succeeded or skipped. */
const allDone = (steps: StepRow[]) => steps.every((s) => s.status === 'SUCCEEDED' || s.status === 'SKIPPED');

/** Whether a reviewer's verdict passes: a success at the confidence the settings ask. */
const passes = (run: RoleRun, rec: ExecRecord) => run.output.success && run.output.confidence >= (rec.settings ?? DEFAULT_SETTINGS).confidence_threshold;

/** A built context whose move has not committed: the columns and the trace it writes. */
interface ContextBuilt {
  patch: Pick<TicketPatch, 'assembly_id' | 'assembly_version'>;
  trace: TicketEventInput[];
}

/** A batch's passed review, as its move writes it. */
interface PassedReview {
  rec: ExecRecord;
  trace: TicketEventInput[];
  /** Its steps' contexts, cleared (EPHEMERAL memory scope ids). */
  ephemeral: string[];
  /** The snapshot that marks it reviewed. */
  snapshot: SnapshotRow;
  /** The batch's held step ends (without their contexts), written first by the review's statement; runBatch holds only ends abc_step_records can write. */
  step?: { held: HeldSteps; commits: StepCommit[] };
}

/** Batches' passed reviews not written yet, since when, and the steps as they leave them. */
interface Chain {
  reviews: PassedReview[];
  since: number;
  steps?: StepRow[];
}

const NO_CHAIN: Chain = { reviews: [], since: 0 };

/** What passed batch reviews write with their move: their steps' contexts cleared and their snapshots, in one statement each. */
const reviewRecords = (row: TicketRow, reviews: PassedReview[]) =>
  reviews.length ? [memoryClear(row.tenant_id, 'EPHEMERAL', reviews.flatMap((p) => p.ephemeral)), snapshotsInsert(reviews.map((p) => p.snapshot))] : [];

/** A passed review's held step ends as the records its move writes first. */
const recordsOf = (p: PassedReview): RecordsFirst | undefined => p.step && ((ahead) => stepRecords(p.step!.commits, ahead)!);

/** Each passed batch review's hops, settled then passed, its steps' records written ahead of its settling. */
function settledHops(reviews: PassedReview[]): { trigger: LifecycleTrigger; trace?: TicketEventInput[]; first?: RecordsFirst }[] {
  return reviews.flatMap((p) => [{ trigger: 'steps_settled' as const, first: recordsOf(p) }, { trigger: 'review_passed' as const, trace: p.trace }]);
}

/** The result's passed review: the ticket's result and warnings, and the reviewer's decision. */
interface ReviewedResult {
  patch: TicketPatch;
  trace: TicketEventInput[];
}

/** What the views of one pass over a ticket share, each frozen once. */
interface Pass {
  /** The pass's trace context: each phase's span is its child. */
  context?: Context;
  request?: TicketRow['request'];
  goal?: ReturnType<typeof goalOf>;
  hints?: ExecRecord['hints'];
  /** Each succeeded step's output, as of its end. */
  outputs?: Map<string, { endedAt: string; output: unknown }>;
}

/** A succeeded step's output, frozen once per end of the step: a step that runs again ends again. */
function frozenOutput(pass: Pass, step: StepRow): unknown {
  const output = step.output;
  if (output === null || typeof output !== 'object') return output;
  const endedAt = String(step.ended_at);
  const known = pass.outputs?.get(step.step_id);
  if (known?.endedAt === endedAt) return known.output;
  const copy = frozenOnce(output);
  (pass.outputs ??= new Map()).set(step.step_id, { endedAt, output: copy });
  return copy;
}

/** What a phase answers when this pass over the ticket ends. */
const STOP = Symbol('stop');

/** The abort reason of a ticket handed back at shutdown. */
const HAND_BACK = new Error('handed back at shutdown');
/** How long handed-back tickets get to reach a step boundary. */
const HAND_BACK_MS = 5000;

/** A ticket a sync slot runs from before it exists (NowSlot.start), and its creation. */
interface Unborn {
  ticket: NewTicket;
  /** Its first event (ticket_created). */
  event: TicketEventInput;
  /** Its creation, once written (or being written). */
  writing?: Promise<TicketRow | undefined>;
  outcome?: 'created' | 'taken' | 'failed';
  /** Settles with the creation: the row, or undefined when the idempotency key was taken. */
  created: Promise<TicketRow | undefined>;
  /** Takes `write` as the creation, once. */
  write(write: Promise<TicketRow | undefined>): Promise<TicketRow | undefined>;
}

function unborn(ticket: NewTicket, event: TicketEventInput): Unborn {
  let settle!: (row: Promise<TicketRow | undefined>) => void;
  const created = new Promise<TicketRow | undefined>((resolve) => (settle = resolve));
  // Whoever submitted awaits it; a failure is theirs, not unhandled.
  created.catch(() => undefined);
  const u: Unborn = {
    ticket,
    event,
    created,
    write: (write) => {
      if (u.writing) throw new Error('a ticket is created once');
      u.writing = write.then(
        (row) => ((u.outcome = row ? 'created' : 'taken'), row),
        (error: unknown) => ((u.outcome = 'failed'), Promise.reject(error)),
      );
      settle(u.writing);
      return u.writing;
    },
  };
  return u;
}
