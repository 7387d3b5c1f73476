// The contract job queue (graphile-worker, in PostgreSQL) and the claims
// workers hold on tickets. A ticket is created claimed: by the submitting core
// that runs a sync one at once, or by its admission (admit), which adds the
// jobs of the tickets admitted meanwhile in one statement after their commits.
// Adding a job NOTIFYs, and PostgreSQL makes notifying commits wait for each
// other; a ticket's commit that adds none shares its WAL flush with others.
// A claim that lapses (its worker stopped renewing it, or its core died before
// the job was added) is swept: the worker's queue locks are released and the
// ticket gets a job if it has none, so a live worker resumes it.
import pg from 'pg';
import { Logger as WorkerLogger, run, runMigrations, type Runner } from 'graphile-worker';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../runtime/log.js';
import { addAdmittedJobs, admissionOwner, insertTicket, lockStaleTicketLeases, releaseTicketLeases, renewTicketLease, takeTicketLease, type NewTicket, type TicketEventInput, type TicketRow } from './ticket-store.js';
import { CONNECT_TIMEOUT_MS, poolIdleMs, type Orm } from './orm.js';

export const EXECUTE_TASK = 'contract_execute';

export interface QueueOptions {
  orm: Orm;
  log: Logger;
  /** Queue workers in this process; 0 only enqueues. */
  concurrency: number;
  /** How long a worker's claim on a ticket lasts without renewal. */
  leaseMs: number;
  pollIntervalMs: number;
}

/** Runs one ticket; `workerId` is the queue worker holding the job. */
export type TicketHandler = (ticket: string, workerId: string) => Promise<void>;

/** Contract jobs ready to run and not taken, and how long the oldest of them has waited. */
export async function queueStats(em: EntityManager): Promise<{ depth: number; oldestSeconds: number }> {
  const [row] = await em.execute<{ depth: number; oldest: number | null }[]>(
    'SELECT count(*)::int AS depth, extract(epoch FROM now() - min(run_at))::float8 AS oldest FROM graphile_worker.jobs WHERE locked_at IS NULL AND run_at <= now()',
  );
  return { depth: row?.depth ?? 0, oldestSeconds: row?.oldest ?? 0 };
}

/** The pause before admitted tickets whose jobs failed to be added are tried again. */
const ADMIT_RETRY_MS = 200;

export class ContractQueue {
  #runner: Runner | undefined;
  #pool: pg.Pool | undefined;
  #closed = false;
  /** Tickets admitted and committed, whose jobs are not added yet. */
  #admitted = new Set<string>();
  #adding: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  readonly #log: Logger;

  constructor(readonly opts: QueueOptions) {
    this.#log = opts.log;
  }

  /** Installs the queue schema and, with concurrency > 0, starts the workers. */
  async start(handler: TicketHandler): Promise<void> {
    // The queue's own small pool: one connection per worker plus its LISTEN and one spare.
    const pgPool = new pg.Pool({ connectionString: this.opts.orm.config.get('clientUrl')!, max: Math.max(2, this.opts.concurrency + 2), idleTimeoutMillis: poolIdleMs(this.opts.orm), connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    pgPool.on('error', (error) => this.#log.warn({ err: error }, 'queue pool connection failed'));
    this.#pool = pgPool;
    const logger = new WorkerLogger((scope) => (level, message, meta) => {
      const l = level === 'error' ? 'error' : level === 'warning' ? 'warn' : 'debug';
      this.#log[l]({ scope, ...meta }, message);
    });
    await runMigrations({ pgPool, logger });
    if (this.opts.concurrency <= 0 || this.#closed) return;
    this.#runner = await run({
      pgPool,
      concurrency: this.opts.concurrency,
      noHandleSignals: true,
      pollInterval: this.opts.pollIntervalMs,
      logger,
      taskList: {
        [EXECUTE_TASK]: (payload, helpers) => handler((payload as { ticket: string }).ticket, helpers.job.locked_by ?? 'unknown-worker'),
      },
    });
  }

  /**
   * Enqueues a ticket's execution inside the caller's transaction (so it
   * commits with the ticket), now or at `runAt`. The job key is the ticket: a
   * later enqueue replaces a job still waiting (a human wait's timeout job is
   * replaced by the feedback's).
   */
  async enqueue(tx: EntityManager, ticket: string, runAt?: Date): Promise<void> {
    const jobs = this.jobsFor('ARRAY[?::text]', { runAt });
    await tx.execute(`SELECT count(*) FROM ${jobs.sql}`, [ticket, ...jobs.params]);
  }

  /**
   * The enqueue of tickets (`tickets`: an expression of a text array of
   * distinct ids, whose parameters come first) as one call that returns their
   * jobs, keyed by ticket: due at `runAt` (else now), or with `keepRunAt` a
   * job already waiting keeps its time. add_job is add_jobs of one, so any
   * number of tickets costs one call.
   */
  jobsFor(tickets: string, opts: { runAt?: Date; keepRunAt?: boolean } = {}): { sql: string; params: unknown[] } {
    return {
      sql: `graphile_worker.add_jobs(ARRAY(
              SELECT (job.task, json_build_object('ticket', t), NULL, job.run_at, NULL, t, NULL, NULL)::graphile_worker.job_spec
              FROM unnest(${tickets}) AS t, (SELECT ?::text AS task, ?::timestamptz AS run_at) job), ?::boolean)`,
      params: [EXECUTE_TASK, opts.runAt?.toISOString() ?? null, opts.keepRunAt ?? false],
    };
  }

  /** The claim an admitted ticket is created with, until its job is added (admit) or the claim lapses (recover). */
  admission(ticket: string): { owner: string; ms: number } {
    return { owner: admissionOwner(ticket), ms: this.opts.leaseMs };
  }

  /**
   * Creates `t` in INIT with its first event, claimed by its admission, and
   * adds its job once that commit is done (admit); undefined, with nothing
   * written, when its idempotency key is taken.
   */
  async create(em: EntityManager, t: NewTicket, event: TicketEventInput): Promise<TicketRow | undefined> {
    const row = await insertTicket(em, t, { event, claim: this.admission(t.ticket) });
    if (row) this.admit(t.ticket);
    return row;
  }

  /**
   * Adds the job of a ticket created with its admission's claim, once that
   * commit is done: with the others admitted meanwhile, in one statement that
   * also drops their claims. A ticket whose claim is gone (a cancel ended it,
   * or the claim lapsed and recover() gave it a job) gets none here.
   */
  admit(ticket: string): void {
    this.#admitted.add(ticket);
    this.#addSoon();
  }

  /** Starts adding what waits, unless that is under way; goes again for what arrived as it ended. */
  #addSoon(): void {
    if (this.#adding) return;
    this.#adding = this.#addAdmitted().finally(() => {
      this.#adding = undefined;
      if (this.#admitted.size && this.#pool && !this.#closed) this.#addSoon();
    });
  }

  async #addAdmitted(): Promise<void> {
    while (this.#admitted.size && this.#pool) {
      const tickets = [...this.#admitted];
      this.#admitted.clear();
      try {
        await addAdmittedJobs(this.#pool, tickets, (ids) => this.jobsFor(ids));
      } catch (error) {
        // Tried again while the process lives; after a crash, the claims lapse and recover() adds the jobs.
        this.#log.warn({ err: error, tickets: tickets.length }, 'could not add the jobs of admitted tickets; retrying');
        for (const t of tickets) this.#admitted.add(t);
        if (this.#closed) return;
        await new Promise((r) => setTimeout(r, ADMIT_RETRY_MS));
      }
    }
  }

  /** Takes (or takes over) the claim on a ticket, inside `tx`. */
  async claim(tx: EntityManager, ticket: string, workerId: string): Promise<void> {
    await takeTicketLease(tx, ticket, workerId, this.opts.leaseMs);
  }

  /** Keeps the claim alive every third of the lease; calls `lost` if another worker took it. */
  hold(ticket: string, workerId: string, lost: () => void): () => void {
    const timer = setInterval(async () => {
      try {
        if (!(await renewTicketLease(this.opts.orm.em.fork(), ticket, workerId, this.opts.leaseMs))) lost();
      } catch (error) {
        this.#log.warn({ err: error, ticket }, 'lease renewal failed');
      }
    }, Math.max(50, Math.floor(this.opts.leaseMs / 3)));
    return () => clearInterval(timer);
  }

  /** Gives up a claim, so the sweeper never mistakes a live worker for a dead one. */
  async release(ticket: string, workerId: string): Promise<void> {
    await releaseTicketLeases(this.opts.orm.em.fork(), [ticket], workerId).catch((error: unknown) => this.#log.warn({ err: error, ticket }, 'could not release the claim; it lapses on its own'));
  }

  /**
   * Frees tickets whose worker stopped renewing its claim: the dead worker's
   * queue locks are released (graphile-worker's force_unlock_workers), and a
   * ticket without a job (a sync one its core ran at once) gets one, due now;
   * a job it has keeps its time (a human wait's deadline). A live worker then
   * resumes the lifecycle where it stopped.
   */
  async recover(): Promise<number> {
    return this.opts.orm.em.fork().transactional(async (tx) => {
      const stale = await lockStaleTicketLeases(tx);
      if (!stale.length) return 0;
      const owners = [...new Set(stale.map((s) => s.lease_owner))];
      const tickets = JSON.stringify(stale.map((s) => s.ticket));
      await tx.execute('SELECT graphile_worker.force_unlock_workers(ARRAY(SELECT jsonb_array_elements_text(?::jsonb)))', [JSON.stringify(owners)]);
      const jobs = this.jobsFor('ARRAY(SELECT jsonb_array_elements_text(?::jsonb))', { keepRunAt: true });
      await tx.execute(`SELECT count(*) FROM ${jobs.sql}`, [tickets, ...jobs.params]);
      await releaseTicketLeases(tx, stale.map((s) => s.ticket));
      this.#log.warn({ tickets: stale.map((s) => s.ticket), workers: owners }, 'recovered tickets of workers that stopped');
      return stale.length;
    });
  }

  /** Stops taking jobs at once; resolves when the jobs in flight have returned. */
  stopWorkers(): Promise<void> {
    this.#closed = true;
    this.#stopping ??= this.#runner?.stop().catch((error: unknown) => this.#log.warn({ err: error }, 'queue runner stop failed')) ?? Promise.resolve();
    return this.#stopping;
  }

  async close(): Promise<void> {
    void this.stopWorkers();
    // The jobs of tickets already admitted go out first; any that cannot, recover() adds once their claims lapse.
    await this.#adding;
    await this.#pool?.end().catch(() => {});
  }
}
