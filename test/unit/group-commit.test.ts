import { describe, expect, it } from 'vitest';
import { fulfilled, GroupCommit, oneByOne } from '../../src/runtime/group-commit.js';

/** A write that records its groups and answers when `release` is called. */
function recorder() {
  const groups: number[][] = [];
  const pending: (() => void)[] = [];
  const write = (items: number[]) => {
    groups.push(items);
    return new Promise<PromiseSettledResult<number>[]>((resolve) => pending.push(() => resolve(fulfilled(items.map((i) => i * 10)))));
  };
  const release = async () => {
    while (!pending.length) await new Promise((r) => setImmediate(r));
    pending.shift()!();
  };
  return { groups, write, release };
}

describe('group commit', () => {
  it('writes what one turn asks for together, and what arrives meanwhile in the next write', async () => {
    const { groups, write, release } = recorder();
    const commit = new GroupCommit(write);
    const first = [1, 2, 3].map((i) => commit.add(i));
    await release();
    expect(await Promise.all(first)).toEqual([10, 20, 30]);
    expect(groups).toEqual([[1, 2, 3]]);

    const alone = commit.add(4);
    await new Promise((r) => setImmediate(r));
    // 4 is being written: 5 and 6 wait for it, then go together.
    const later = [commit.add(5), commit.add(6)];
    await release();
    await release();
    expect(await Promise.all([alone, ...later])).toEqual([40, 50, 60]);
    expect(groups.slice(1)).toEqual([[4], [5, 6]]);
  });

  it('writes at most `max` items at once', async () => {
    const { groups, write, release } = recorder();
    const commit = new GroupCommit(write, 2);
    const all = [1, 2, 3].map((i) => commit.add(i));
    await release();
    await release();
    expect(await Promise.all(all)).toEqual([10, 20, 30]);
    expect(groups).toEqual([[1, 2], [3]]);
  });

  it("fails a group's items when its write throws, and each item with its own outcome otherwise", async () => {
    const broken = new GroupCommit<number, number>(async () => {
      throw new Error('down');
    });
    await expect(Promise.all([broken.add(1), broken.add(2)])).rejects.toThrow('down');
    const mixed = new GroupCommit<number, number>((items) => oneByOne(items, async (i) => {
      if (i === 2) throw new Error('not two');
      return i;
    }));
    const settled = await Promise.allSettled([1, 2, 3].map((i) => mixed.add(i)));
    expect(settled.map((s) => (s.status === 'fulfilled' ? s.value : (s.reason as Error).message))).toEqual([1, 'not two', 3]);
  });
});
