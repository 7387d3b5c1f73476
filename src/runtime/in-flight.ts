// Work a core is doing in the background, by key: what shutdown waits for,
// what it aborts once its grace period is over, and what recovery must not
// take from under it. Runs, tool executions and tickets use it alike.

export class InFlight {
  readonly #jobs = new Map<string, { controller: AbortController; done: Promise<void> }>();
  #seq = 0;

  /** Tracks `work` under `key` (a fresh key when omitted) until it settles; a failure is the work's own to report. */
  track(work: Promise<unknown>, controller = new AbortController(), key = `job-${++this.#seq}`): Promise<void> {
    const done = work.then(
      () => {},
      () => {},
    );
    this.#jobs.set(key, { controller, done });
    void done.finally(() => {
      if (this.#jobs.get(key)?.done === done) this.#jobs.delete(key);
    });
    return done;
  }

  /** Tracks work the caller awaits itself; call the result when it ends. */
  hold(key: string, controller: AbortController): () => void {
    let release!: () => void;
    this.track(new Promise<void>((resolve) => (release = resolve)), controller, key);
    return release;
  }

  keys(): string[] {
    return [...this.#jobs.keys()];
  }

  abortAll(reason: unknown): void {
    for (const { controller } of this.#jobs.values()) controller.abort(reason);
  }

  /**
   * Waits for every job; those still going after `graceMs` are aborted with
   * `reason`, then awaited for at most `afterAbortMs` more. Answers the keys of
   * the jobs that ignored their abort: shutdown goes on without them, and what
   * they leave unfinished is recovered as after a crash.
   */
  async drain(graceMs = Infinity, reason?: unknown, afterAbortMs = ABORTED_JOBS_WAIT_MS): Promise<string[]> {
    const all = Promise.all([...this.#jobs.values()].map((j) => j.done));
    if (!Number.isFinite(graceMs)) return all.then(() => []);
    if (await settlesWithin(all, graceMs)) return [];
    this.abortAll(reason);
    return (await settlesWithin(all, afterAbortMs)) ? [] : this.keys();
  }
}

/** How long shutdown waits for aborted jobs to end: as long as the engine waits for the tickets it hands back. */
const ABORTED_JOBS_WAIT_MS = 5_000;

/** Whether `promise` settles within `ms` (false, too, as soon as `signal` aborts). */
export async function settlesWithin(promise: Promise<unknown>, ms: number, signal?: AbortSignal): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    onAbort = () => resolve(false);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  const settled = await Promise.race([promise.then(() => true, () => true), timeout]);
  clearTimeout(timer);
  signal?.removeEventListener('abort', onAbort!);
  return settled;
}
