// The event log's append: one statement, alone or in a caller's transaction.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendEvents, readEvents } from '../../src/store/event-log.js';
import type { Orm } from '../../src/store/orm.js';
import { migratedOrm } from '../support/db.js';

let store: Awaited<ReturnType<typeof migratedOrm>>;
let orm: Orm;
let n = 0;

beforeAll(async () => {
  store = await migratedOrm();
  orm = store.orm;
});
afterAll(() => store.close());

async function newRun(status = 'STREAMING'): Promise<{ runId: string; sessionId: string }> {
  const sessionId = `sess_log_${++n}`;
  const runId = `run_log_${n}`;
  const em = orm.em.fork();
  await em.execute('INSERT INTO sessions (session_id, user_id, tenant_id) VALUES (?, ?, ?)', [sessionId, 'u', 'default']);
  await em.execute('INSERT INTO runs (run_id, session_id, root_agent_id, status, trace_id, tenant_id) VALUES (?, ?, ?, ?, ?, ?)', [runId, sessionId, 'agent', status, 't'.repeat(32), 'default']);
  return { runId, sessionId };
}

describe('appending events', () => {
  it('gives parallel appends gap-free seqs, with cursors in seq order', async () => {
    const { runId, sessionId } = await newRun();
    const batches = Array.from({ length: 12 }, (_, b) => [{ type: 'delta', payload: { b, i: 0 } }, { type: 'delta', payload: { b, i: 1 } }]);
    const stored = await Promise.all(batches.map((batch) => appendEvents(orm.em.fork(), runId, batch)));
    for (const [b, rows] of stored.entries()) {
      expect(rows.map((r) => r.payload)).toEqual([{ b, i: 0 }, { b, i: 1 }]);
      expect(rows[1]!.seq).toBe(rows[0]!.seq + 1);
    }
    const log = await readEvents(orm.em.fork(), { sessionId }, '0', 100);
    expect(log.map((e) => e.seq)).toEqual(Array.from({ length: 24 }, (_, i) => i + 1));
    const [run] = await orm.em.fork().execute<{ last_seq: number }[]>('SELECT last_seq FROM runs WHERE run_id = ?', [runId]);
    expect(run!.last_seq).toBe(24);
  });

  it('rolls back with the caller’s transaction', async () => {
    const { runId } = await newRun();
    await expect(
      orm.em.fork().transactional(async (tx) => {
        await appendEvents(tx, runId, [{ type: 'delta' }]);
        throw new Error('abandon');
      }),
    ).rejects.toThrow('abandon');
    expect(await readEvents(orm.em.fork(), { runId }, '0', 10)).toEqual([]);
    await appendEvents(orm.em.fork(), runId, [{ type: 'delta' }]);
    expect((await readEvents(orm.em.fork(), { runId }, '0', 10)).map((e) => e.seq)).toEqual([1]);
  });

  it('drops late events of an ended run only when asked, and refuses an unknown run', async () => {
    const { runId } = await newRun('DONE');
    expect(await appendEvents(orm.em.fork(), runId, [{ type: 'delta' }], { onlyIfActive: true })).toEqual([]);
    expect(await readEvents(orm.em.fork(), { runId }, '0', 10)).toEqual([]);
    expect(await appendEvents(orm.em.fork(), runId, [{ type: 'run_note' }])).toHaveLength(1);
    await expect(appendEvents(orm.em.fork(), 'run_missing', [{ type: 'delta' }])).rejects.toThrow(/does not exist/);
  });
});
