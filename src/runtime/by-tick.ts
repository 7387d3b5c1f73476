// Adaptive batching for streams: what arrives in one burst (one callback and
// the promise jobs it sets off, such as the events parsed from one socket
// read) leaves as one batch. A lone item waits for nothing but the end of its
// burst, not for the next turn of the event loop. A burst longer than `max`
// leaves in batches of `max`.
const TURN = Symbol('turn');

export async function* byTick<T>(source: AsyncIterable<T>, max = Infinity): AsyncGenerator<T[]> {
  const it = source[Symbol.asyncIterator]();
  let next = it.next();
  try {
    for (;;) {
      const first = await next;
      if (first.done) return;
      const batch = [first.value];
      // A tick queued from a promise job runs once the promise jobs have all run.
      const turn = new Promise<typeof TURN>((resolve) => process.nextTick(resolve, TURN));
      for (;;) {
        next = it.next();
        // A full batch leaves now; the read just asked for starts the next one.
        if (batch.length >= max) break;
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
