// A single-consumer async queue: producers push, one for-await loop drains.
// A producer that awaits room() before it pushes (when `size` says the queue
// is full) keeps the queue bounded: it waits while the consumer is behind.
export class AsyncQueue<T> implements AsyncIterable<T> {
  #items: T[] = [];
  #wake: (() => void) | undefined;
  /** Producers waiting for the consumer to take the backlog. */
  #roomWaiters: (() => void)[] = [];
  #ended = false;

  push(item: T): void {
    if (this.#ended) return;
    this.#items.push(item);
    this.#wake?.();
  }

  /** Resolves once the queue holds fewer than `max` items, or has ended. */
  room(max: number): Promise<void> {
    if (this.#items.length < max || this.#ended) return Promise.resolve();
    return new Promise((resolve) => this.#roomWaiters.push(resolve));
  }

  end(): void {
    this.#ended = true;
    this.#wake?.();
    this.#freeRoom();
  }

  get size(): number {
    return this.#items.length;
  }

  get ended(): boolean {
    return this.#ended;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.#items.length) {
        // Take the whole backlog at once: a long queue is drained in order without shifting it.
        const items = this.#items;
        this.#items = [];
        this.#freeRoom();
        for (const item of items) yield item;
        continue;
      }
      if (this.#ended) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }

  #freeRoom(): void {
    for (const resolve of this.#roomWaiters.splice(0)) resolve();
  }
}
