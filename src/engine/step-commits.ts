// When a step's start is committed. A step with side effects is recorded as
// started before it runs (write-ahead). One without may run first: if it ends
// within `deferMs` (ABC_STEP_START_DEFER_MS), its start and end commit
// together; otherwise its start commits alone, while it runs. A crash before
// that commit leaves the step PENDING and it runs again, which only a step
// without side effects may.
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError } from '../domain/errors.js';
import { isIllegalTransition } from '../store/transition.js';
import type { TicketEventInput } from '../store/ticket-store.js';

/** The start's writes; with `collect`, its events go there for the end to append. */
type Begin = (tx: EntityManager, collect?: TicketEventInput[]) => Promise<unknown>;
/** The end's writes; `prior` are the start's events when both share the commit. */
type End = (tx: EntityManager, prior: TicketEventInput[]) => Promise<unknown>;

export class StepCommits {
  #start: Promise<boolean> | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly em: () => EntityManager,
    private readonly begin: Begin,
    /** How long the step may run before its start is committed (0 unless nothing it may call has side effects). */
    private readonly deferMs: number,
  ) {}

  /** Commits the start now, or arms its deferral. False when a cancel skipped the step first. */
  async open(): Promise<boolean> {
    if (!this.deferMs) return this.#commitStart();
    this.#timer = setTimeout(() => void this.#commitStart().catch(() => undefined), this.deferMs);
    return true;
  }

  /** Commits the end, with the start if that has not gone out. False when a cancel skipped the step first. */
  async close(end: End): Promise<boolean> {
    clearTimeout(this.#timer);
    if (this.#start) return (await this.#start) && this.#commit((tx) => end(tx, []));
    return this.#commit(async (tx) => {
      const events: TicketEventInput[] = [];
      await this.begin(tx, events);
      await end(tx, events);
    });
  }

  #commitStart(): Promise<boolean> {
    return (this.#start ??= this.#commit((tx) => this.begin(tx)));
  }

  #commit(work: (tx: EntityManager) => Promise<unknown>): Promise<boolean> {
    return this.em()
      .transactional(work)
      .then(
        () => true,
        (error: unknown) => {
          // A cancel skips the steps that have not started; this one then never runs or records.
          if (isIllegalTransition(error) && (error as AbcError).payload.details?.from === 'SKIPPED') return false;
          throw error;
        },
      );
  }
}
