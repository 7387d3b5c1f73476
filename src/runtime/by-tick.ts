// Adaptive batching for streams: what arrives in one turn of the event loop
// leaves as one batch. A lone item waits one turn at most; under load, items
// read from one socket read travel together.
const TURN = Symbol('turn');

export async function* byTick<T>(source: AsyncIterable<T>): AsyncGenerator<T[]> {
  const it = source[Symbol.asyncIterator]();
  let next = it.next();
  try {
    for (;;) {
      const first = await next;
      if (first.done) return;
      const batch = [first.value];
      const turn = new Promise<typeof TURN>((resolve) => setImmediate(resolve, TURN));
      for (;;) {
        next = it.next();
        let got: IteratorResult<T> | typeof TURN;
        try {
          got = await Promise.race([next, turn]);
        } catch (error) {
          // What arrived before the failure still goes out, then the failure.
          yield batch;
          throw error;
        }
        if (got === TURN) break;
        if (got.done) return yield batch;
        batch.push(got.value);
      }
      yield batch;
    }
  } finally {
    // A consumer that stops early stops the source too; its pending read settles unobserved.
    next.catch(() => undefined);
    void it.return?.()?.catch(() => undefined);
  }
}
