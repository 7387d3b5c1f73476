// Group commit: while one write is in flight, the items that arrive queue up
// and go out together in the next. An item alone waits only for the end of
// the event loop's turn, so that what that turn's other callbacks ask for
// goes with it; a burst costs one write per round.

interface Waiting<I, O> {
  item: I;
  resolve(out: O): void;
  reject(error: unknown): void;
}

/** An item's outcome: its value, or its own error. */
export type Outcome<O> = PromiseSettledResult<O>;

export class GroupCommit<I, O> {
  readonly #write: (items: I[]) => Promise<Outcome<O>[]>;
  readonly #max: number;
  #waiting: Waiting<I, O>[] = [];
  #running = false;

  /** `write` answers each item's outcome, in order; when it throws, every item of its group fails with the error. */
  constructor(write: (items: I[]) => Promise<Outcome<O>[]>, max = 64) {
    this.#write = write;
    this.#max = max;
  }

  /** Writes `item` in the next group: at most `max` items, in arrival order. */
  add(item: I): Promise<O> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ item, resolve, reject });
      if (this.#running) return;
      this.#running = true;
      setImmediate(() => void this.#run());
    });
  }

  async #run(): Promise<void> {
    while (this.#waiting.length) {
      const group = this.#waiting.splice(0, this.#max);
      try {
        const outs = await this.#write(group.map((w) => w.item));
        group.forEach((w, i) => {
          const out = outs[i]!;
          if (out.status === 'fulfilled') w.resolve(out.value);
          else w.reject(out.reason);
        });
      } catch (error) {
        for (const w of group) w.reject(error);
      }
    }
    this.#running = false;
  }
}

/** Each item written alone by `write`, one after another, each with its own outcome. */
export async function oneByOne<I, O>(items: I[], write: (item: I) => Promise<O>): Promise<Outcome<O>[]> {
  const outs: Outcome<O>[] = [];
  for (const item of items) outs.push(await write(item).then((value) => ({ status: 'fulfilled', value }) as const, (reason: unknown) => ({ status: 'rejected', reason }) as const));
  return outs;
}

/** Every item's outcome: `values`. */
export const fulfilled = <O>(values: O[]): Outcome<O>[] => values.map((value) => ({ status: 'fulfilled', value }));
