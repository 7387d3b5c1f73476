import { describe, expect, it } from 'vitest';
import { byTick } from '../../src/runtime/by-tick.js';
import { AsyncQueue } from '../../src/grpc/async-queue.js';

const turn = () => new Promise((resolve) => setImmediate(resolve));

async function collect<T>(source: AsyncIterable<T[]>): Promise<T[][]> {
  const out: T[][] = [];
  for await (const batch of source) out.push(batch);
  return out;
}

describe('byTick', () => {
  it('sends what arrives in one turn as one batch, and each later turn on its own', async () => {
    const q = new AsyncQueue<number>();
    const batches = collect(byTick(q));
    q.push(1);
    q.push(2);
    q.push(3);
    await turn();
    await turn();
    q.push(4);
    await turn();
    await turn();
    q.push(5);
    q.push(6);
    q.end();
    expect(await batches).toEqual([[1, 2, 3], [4], [5, 6]]);
  });

  it('splits a burst longer than its max into batches of max, every item once, in order', async () => {
    const q = new AsyncQueue<number>();
    const batches = collect(byTick(q, 3));
    for (let i = 1; i <= 7; i++) q.push(i);
    await turn();
    q.push(8);
    q.end();
    expect(await batches).toEqual([[1, 2, 3], [4, 5, 6], [7], [8]]);
  });

  it('sends a lone item at the end of its burst, before the event loop turns', async () => {
    const q = new AsyncQueue<string>();
    const it = byTick(q)[Symbol.asyncIterator]();
    q.push('a');
    const first = it.next();
    expect(await Promise.race([first, turn().then(() => 'the loop turned first')])).toEqual({ done: false, value: ['a'] });
    q.end();
    expect(await it.next()).toEqual({ done: true, value: undefined });
  });

  it('sends what came before a failure of the source, then the failure', async () => {
    async function* failing() {
      yield 1;
      yield 2;
      throw new Error('cut');
    }
    const seen: number[][] = [];
    await expect(
      (async () => {
        for await (const batch of byTick(failing())) seen.push(batch);
      })(),
    ).rejects.toThrow('cut');
    expect(seen).toEqual([[1, 2]]);
  });

  it('stops the source when the consumer stops', async () => {
    let stopped = false;
    async function* endless() {
      try {
        for (let i = 0; ; i++) {
          yield i;
          await turn();
        }
      } finally {
        stopped = true;
      }
    }
    for await (const batch of byTick(endless())) if (batch[0]! >= 2) break;
    await turn();
    await turn();
    expect(stopped).toBe(true);
  });
});
