// When a step's start is committed. A step with side effects is recorded as
// started before it runs (write-ahead). One without may run first: if it ends
// within `deferMs` (ABC_STEP_START_DEFER_MS), its start and end commit
// together; otherwise its start commits alone, while it runs. A crash before
// that commit leaves the step PENDING and it runs again, which only a step
// without side effects may. Its end, in turn, may wait as long for its
// batch's review (see runBatch). The commits of one batch's steps that are
// ready together go out as one call (group commit).
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError } from '../domain/errors.js';
import { commitStep, commitStepsTogether, type StepCommit, type StepHop } from '../store/step-commit.js';
import type { AnnounceTicket, StepRow } from '../store/ticket-store.js';
import { isIllegalTransition } from '../store/transition.js';

/** The end of a step: its hop and what it writes with it. */
export type StepEnd = Omit<StepCommit, 'ticket' | 'stepId' | 'row' | 'hops' | 'memory'> & { hop: StepHop };

/**
 * A batch's step commits. Those asked for in the same turn of the event loop,
 * or while the previous group is being written, commit together; one alone,
 * or a group one of whose rows has moved on, commits by commitStep.
 */
export class StepCommitQueue {
  #waiting: { commit: StepCommit; resolve: (row: StepRow) => void; reject: (error: unknown) => void }[] = [];
  #draining = false;

  constructor(
    private readonly em: () => EntityManager,
    /** Awaited before each write: what must commit ahead of the batch's steps. */
    private readonly before?: () => Promise<unknown>,
    /** Announces each commit after it (see announcing). */
    private readonly announce?: AnnounceTicket,
  ) {}

  commit(commit: StepCommit): Promise<StepRow> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ commit, resolve, reject });
      if (this.#draining) return;
      this.#draining = true;
      setImmediate(() => void this.#drain());
    });
  }

  async #drain(): Promise<void> {
    while (this.#waiting.length) {
      // What must commit first may still be going out: the commits asked for meanwhile join this group.
      const refused = await this.before?.().then(() => undefined, (error: unknown) => ({ error }));
      const group = this.#waiting.splice(0);
      if (refused) {
        for (const w of group) w.reject(refused.error);
        continue;
      }
      try {
        const rows = group.length > 1 ? await commitStepsTogether(this.em, group.map((w) => w.commit), this.announce) : undefined;
        if (rows) {
          group.forEach((w, i) => w.resolve(rows[i]!));
          continue;
        }
      } catch (error) {
        for (const w of group) w.reject(error);
        continue;
      }
      await Promise.all(group.map((w) => commitStep(this.em, w.commit, this.announce).then(w.resolve, w.reject)));
    }
    this.#draining = false;
  }
}

export class StepCommits {
  #start: Promise<StepRow | undefined> | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly queue: StepCommitQueue,
    /** The start: its hop and the step's memory. */
    private readonly start: StepCommit,
    /** How long the step may run before its start is committed (0 unless nothing it may call has side effects). */
    private readonly deferMs: number,
  ) {}

  /** Commits the start now, or arms its deferral. False when a cancel skipped the step first. */
  async open(): Promise<boolean> {
    if (!this.deferMs) return Boolean(await this.#commitStart());
    this.#timer = setTimeout(() => void this.#commitStart().catch(() => undefined), this.deferMs);
    return true;
  }

  /** Commits the end, with the start if that has not gone out; the step as written, undefined when a cancel skipped it first. */
  async close(end: StepEnd): Promise<StepRow | undefined> {
    const commit = await this.held(end);
    return commit && this.#commit(commit);
  }

  /**
   * The end's commit, with the start if that has not gone out, for the caller
   * to write (see HeldStep); undefined when a cancel skipped the step first.
   */
  async held({ hop, ...end }: StepEnd): Promise<StepCommit | undefined> {
    clearTimeout(this.#timer);
    if (!this.#start) return { ...this.start, ...end, hops: [...this.start.hops, hop] };
    const started = await this.#start;
    return started && { ticket: this.start.ticket, stepId: this.start.stepId, row: started, ...end, hops: [hop] };
  }

  /** Writes a commit `held` gave out. */
  write(commit: StepCommit): Promise<StepRow | undefined> {
    return this.#commit(commit);
  }

  #commitStart(): Promise<StepRow | undefined> {
    return (this.#start ??= this.#commit(this.start));
  }

  #commit(c: StepCommit): Promise<StepRow | undefined> {
    return this.queue.commit(c).catch((error: unknown) => {
      // A cancel skips the steps that have not started; this one then never runs or records.
      if (isIllegalTransition(error) && (error as AbcError).payload.details?.from === 'SKIPPED') return undefined;
      throw error;
    });
  }
}
