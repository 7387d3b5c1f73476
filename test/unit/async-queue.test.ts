import { describe, expect, it } from 'vitest';
import { AsyncQueue } from '../../src/grpc/async-queue.js';

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('AsyncQueue', () => {
  it('keeps a producer that awaits room() within its bound until the consumer takes the backlog, and lets it go when the queue ends', async () => {
    const q = new AsyncQueue<number>();
    const pushed: number[] = [];
    const producer = (async () => {
      for (let i = 0; i < 10; i++) {
        await q.room(3);
        q.push(i);
        pushed.push(i);
      }
    })();
    await turn();
    expect(pushed).toEqual([0, 1, 2]); // full: it waits

    const it = q[Symbol.asyncIterator]();
    expect(await it.next()).toEqual({ done: false, value: 0 }); // the consumer took 0, 1 and 2 at once
    await turn();
    expect(pushed).toEqual([0, 1, 2, 3, 4, 5]);
    expect((await it.next()).value).toBe(1);
    expect((await it.next()).value).toBe(2);
    await turn();
    expect(pushed).toEqual([0, 1, 2, 3, 4, 5]); // 3, 4 and 5 still wait

    q.end(); // a closed connection: the producer runs out, its pushes dropped
    await producer;
    expect(pushed).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const rest: number[] = [];
    for (let next = await it.next(); !next.done; next = await it.next()) rest.push(next.value);
    expect(rest).toEqual([3, 4, 5]);
  });
});
