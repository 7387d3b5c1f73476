// A tool call's commits in one statement each (abc_open_tool_call,
// abc_move_tool_call); and a row in another state than their hops start from,
// a live key, an ended run or a key whose irreversible action completed make
// them write nothing, for the caller to take the move-by-move path. The
// records themselves are compared with that path's in test/e2e/tools.
import { describe, expect, it } from 'vitest';
import { moveCall, moveCallArg, openAndEndCall, openCall, openCallArg, type OpenCall } from '../../src/orchestrator/tool-call-commits.js';
import { EVENTS_CHANNEL, readEvents } from '../../src/store/event-log.js';
import { CallCommitter } from '../../src/store/call-committer.js';
import { nativePool, poolOf } from '../../src/store/native.js';
import { deleteExpiredIdempotencyKeys, orphanCalls, overdueCalls } from '../../src/store/tool-call-store.js';
import { inBatches } from '../../src/runtime/ticker.js';
import { toolMetrics } from '../../src/store/metrics-reads.js';
import pg from 'pg';
import { countedDatabase } from '../support/db.js';
import { listen } from '../support/notifications.js';

const { em, counted, orm } = countedDatabase();
/** Commits on the ORM's pool, notifying (no origin); a `counted` EntityManager notes their statements. */
const committer = () => new CallCommitter(poolOf(orm()), '');
let n = 0;

async function newRun(status = 'RUNNING'): Promise<{ runId: string; sessionId: string }> {
  const sessionId = `sess_tcc_${++n}`;
  const runId = `run_tcc_${n}`;
  await em().execute('INSERT INTO sessions (session_id, user_id, tenant_id) VALUES (?, ?, ?)', [sessionId, 'u', 'default']);
  await em().execute('INSERT INTO runs (run_id, session_id, root_agent_id, status, trace_id, tenant_id) VALUES (?, ?, ?, ?, ?, ?)', [runId, sessionId, 'agent', status, 't'.repeat(32), 'default']);
  return { runId, sessionId };
}

const opening = (runId: string, id: string, key = `${runId}:echo:h`): OpenCall => ({
  toolCallId: id, runId, toolName: 'echo', kind: 'builtin', args: { n: 1 }, idempotencyKey: key, hash: 'h', ttlMs: 60_000, timeoutMs: 5000, traceparent: null,
  contract: { actionSummary: 'echo', irreversible: true, timeoutSeconds: 5 },
  created: [{ type: 'tool_call_created', payload: { tool_call_id: id } }],
  hops: [{ trigger: 'policy_checked' }, { trigger: 'dispatch' }, { trigger: 'start' }],
});

const written = async (runId: string, id: string) => ({
  calls: await em().execute('SELECT status, version FROM tool_calls WHERE tool_call_id = ?', [id]),
  contracts: await em().execute('SELECT status, version FROM execution_contracts WHERE subject_id = ?', [id]),
  keys: await em().execute("SELECT response FROM idempotency_keys WHERE scope = 'tool_call' AND key LIKE ?", [`${runId}:%`]),
  events: (await readEvents(em(), { runId }, '0', 100)).map((e) => e.type),
});

describe('a tool call in one statement each', () => {
  it('opens a call through its hops with its key, its contract and its events, and ends it', async () => {
    const { runId } = await newRun();
    const calls: string[] = [];
    counted(calls);
    const opened = await openCall(committer(), opening(runId, 'tc_tcc_open'));
    expect(calls).toHaveLength(1);
    expect(calls[0]).toContain('abc_open_tool_call(');
    expect(opened!.call).toMatchObject({ toolCallId: 'tc_tcc_open', status: 'RUNNING', startedAt: expect.any(Date), deadlineAt: expect.any(Date) });
    expect(await written(runId, 'tc_tcc_open')).toEqual({
      calls: [{ status: 'RUNNING', version: 4 }],
      contracts: [{ status: 'running', version: 2 }],
      keys: [{ response: { tool_call_id: 'tc_tcc_open' } }],
      events: ['tool_call_created', 'tool_call_state', 'tool_call_state', 'tool_call_state', 'execution_state'],
    });

    calls.length = 0;
    const ended = await moveCall(committer(), { toolCallId: 'tc_tcc_open', runId, from: 'RUNNING', hop: { trigger: 'succeed' }, patch: { result: { n: 1 } } });
    expect(calls).toHaveLength(1);
    expect(ended!.call).toMatchObject({ status: 'SUCCEEDED', result: { n: 1 }, completedAt: expect.any(Date) });
    const after = await written(runId, 'tc_tcc_open');
    expect(after.contracts).toEqual([{ status: 'completed', version: 3 }]);
    expect(after.events.slice(5)).toEqual(['tool_call_state', 'execution_state']);
    const [fact] = await em().execute<{ n: number }[]>("SELECT count(*)::int AS n FROM memory WHERE key LIKE 'execution_fact:%' AND value->>'action_summary' = 'echo' AND scope_id = ?", [`sess_tcc_${n}`]);
    expect(fact!.n).toBe(1);
  });

  it('opens and ends a call in one write, leaving the records an open and a move leave', async () => {
    // What a call left, without its ids and times.
    const records = async (runId: string, id: string) => {
      const [call] = await em().execute('SELECT status, version, result, error, started_at IS NOT NULL AS started, completed_at IS NOT NULL AS completed FROM tool_calls WHERE tool_call_id = ?', [id]);
      const [contract] = await em().execute<{ execution_id: string }[]>('SELECT execution_id, status, version, result, error_message, irreversible FROM execution_contracts WHERE subject_id = ?', [id]);
      const transitions = await em().execute('SELECT sequence_number, from_status, to_status, trigger, actor, actor_category FROM execution_transitions WHERE execution_id = ? ORDER BY sequence_number', [contract!.execution_id]);
      const facts = await em().execute("SELECT value - 'execution_id' - 'duration_ms' AS value, tags FROM memory WHERE key = ?", [`execution_fact:${contract!.execution_id}`]);
      const strip = (payload: Record<string, unknown>) => Object.fromEntries(Object.entries(payload).filter(([k]) => !['tool_call_id', 'execution_id', 'timestamp'].includes(k)));
      const events = (await readEvents(em(), { runId }, '0', 100)).map((e) => ({ seq: e.seq, type: e.type, payload: strip(e.payload) }));
      const { execution_id: _, ...kept } = contract!;
      return { call, contract: kept, transitions, facts, events };
    };
    const end = { hop: { trigger: 'succeed' as const }, patch: { result: { n: 1 } } };
    const apart = await newRun();
    await openCall(committer(), opening(apart.runId, 'tc_tcc_apart'));
    await moveCall(committer(), { toolCallId: 'tc_tcc_apart', runId: apart.runId, from: 'RUNNING', ...end });

    // Written once: no row of the call, its contract, its run or its session is written twice.
    const together = await newRun();
    const client = await (await nativePool(orm())).connect();
    let both: Awaited<ReturnType<typeof openAndEndCall>>;
    // The backend's counts may hold its earlier transactions' too, not yet reported: the write's are the difference.
    const counts = async () =>
      (await client.query<{ relname: string; n_tup_ins: string; n_tup_upd: string }>("SELECT relname, n_tup_ins, n_tup_upd FROM pg_stat_xact_user_tables WHERE relname IN ('tool_calls', 'execution_contracts', 'runs', 'sessions') ORDER BY relname")).rows;
    let writes: [string, number, number][];
    try {
      await client.query('BEGIN');
      const before = await counts();
      both = await openAndEndCall(new CallCommitter(client, ''), opening(together.runId, 'tc_tcc_together'), end);
      writes = (await counts()).map((w, i) => [w.relname, Number(w.n_tup_ins) - Number(before[i]!.n_tup_ins), Number(w.n_tup_upd) - Number(before[i]!.n_tup_upd)]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(writes).toEqual([
      ['execution_contracts', 1, 0],
      ['runs', 0, 1],
      ['sessions', 0, 1],
      ['tool_calls', 1, 0],
    ]);
    expect(both!.call).toMatchObject({ toolCallId: 'tc_tcc_together', status: 'SUCCEEDED', result: { n: 1 }, startedAt: expect.any(Date), completedAt: expect.any(Date) });
    expect(both!.events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    const written = await records(together.runId, 'tc_tcc_together');
    expect(written).toEqual(await records(apart.runId, 'tc_tcc_apart'));
    expect(written.contract).toMatchObject({ status: 'completed', version: 3 });
    expect(written.transitions).toHaveLength(2);
    expect(written.facts).toHaveLength(1);
    // Every execution_state event names the call's contract.
    const [contract] = await em().execute<{ execution_id: string }[]>("SELECT execution_id FROM execution_contracts WHERE subject_id = 'tc_tcc_together'");
    const states = (await readEvents(em(), { runId: together.runId, types: ['execution_state'] }, '0', 100)).map((e) => e.payload.execution_id);
    expect(states).toEqual([contract!.execution_id, contract!.execution_id]);
  });

  it('opens and ends a call when its fact cannot be written, and says why on the execution_state event', async () => {
    const { runId } = await newRun();
    await em().execute(`CREATE FUNCTION refuse_fact() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'memory is down'; END $$`);
    await em().execute('CREATE TRIGGER refuse_fact BEFORE INSERT ON memory FOR EACH ROW EXECUTE FUNCTION refuse_fact()');
    try {
      const ended = await openAndEndCall(committer(), opening(runId, 'tc_tcc_both_fact'), { hop: { trigger: 'fail' }, patch: { error: { code: 'tool_failed', message: 'it broke' } } });
      expect(ended!.call).toMatchObject({ status: 'FAILED', error: { code: 'tool_failed', message: 'it broke' } });
      expect(ended!.events.at(-1)!.payload).toMatchObject({ to_status: 'failed', fact_error: expect.stringContaining('memory is down') });
    } finally {
      await em().execute('DROP TRIGGER refuse_fact ON memory; DROP FUNCTION refuse_fact()');
    }
    const states = await readEvents(em(), { runId, types: ['execution_state'] }, '0', 100);
    expect(states.map((e) => [e.payload.to_status, e.payload.fact_error])).toEqual([['running', undefined], ['failed', expect.stringContaining('memory is down')]]);
    expect(await em().execute("SELECT status, error_message FROM execution_contracts WHERE subject_id = 'tc_tcc_both_fact'")).toEqual([{ status: 'failed', error_message: 'it broke' }]);
  });

  it('commits calls that arrive together in one statement, in order, with gap-free seqs', async () => {
    const { runId } = await newRun();
    const calls: string[] = [];
    counted(calls);
    const shared = committer();
    // Sixteen opens of one run at once, the last under the first one's key: it finds the key claimed.
    const opened = await Promise.all(Array.from({ length: 16 }, (_, i) => openCall(shared, opening(runId, `tc_tcc_many_${i}`, `${runId}:echo:${i % 15}`))));
    expect(calls).toHaveLength(1);
    expect(opened.slice(0, 15).map((o) => o?.call.status)).toEqual(Array(15).fill('RUNNING'));
    expect(opened[15]).toBeUndefined();
    const seqs = opened.slice(0, 15).flatMap((o) => o!.events.map((e) => e.seq));
    expect(seqs).toEqual(Array.from({ length: 75 }, (_, i) => i + 1));
    // What each commit answered is what the log holds, field by field.
    expect(opened.slice(0, 15).flatMap((o) => o!.events)).toEqual(await readEvents(em(), { runId }, '0', 100));
    // Their ends, and an open with its end, together again.
    calls.length = 0;
    const ended = await Promise.all([
      ...opened.slice(0, 15).map((o) => moveCall(shared, { toolCallId: o!.call.toolCallId, runId, from: 'RUNNING', hop: { trigger: 'succeed' }, patch: { result: 1 } })),
      openAndEndCall(shared, opening(runId, 'tc_tcc_both', `${runId}:echo:both`), { hop: { trigger: 'succeed' }, patch: { result: 2 } }),
    ]);
    expect(calls).toHaveLength(1);
    expect(ended.map((e) => e?.call.status)).toEqual(Array(16).fill('SUCCEEDED'));
    expect(ended[15]!.events.map((e) => e.type)).toEqual(['tool_call_created', 'tool_call_state', 'tool_call_state', 'tool_call_state', 'execution_state', 'tool_call_state', 'execution_state']);
    const [run] = await em().execute<{ last_seq: number }[]>('SELECT last_seq FROM runs WHERE run_id = ?', [runId]);
    expect(run!.last_seq).toBe(75 + 30 + 7);
  });

  it("numbers an open's events after its run's and its session's, and notifies as every append does", async () => {
    const { runId, sessionId } = await newRun();
    const other = `run_tcc_${++n}`; // a second run of the session, which has events already
    await em().execute('INSERT INTO runs (run_id, session_id, root_agent_id, status, trace_id, tenant_id) VALUES (?, ?, ?, ?, ?, ?)', [other, sessionId, 'agent', 'RUNNING', 't'.repeat(32), 'default']);
    await openCall(committer(), opening(other, 'tc_tcc_other'));
    const listener = await listen(orm().config.get('clientUrl'), EVENTS_CHANNEL);
    try {
      const ended = (await openAndEndCall(committer(), opening(runId, 'tc_tcc_numbered'), { hop: { trigger: 'succeed' }, patch: { result: { n: 1 } } }))!;
      expect(ended.events.map((e) => [e.seq, e.sessionSeq])).toEqual(Array.from({ length: 7 }, (_, i) => [i + 1, i + 6]));
      expect(ended.events).toEqual(await readEvents(em(), { runId }, '0', 100));
      await expect.poll(() => listener.payloads().filter((p) => p.startsWith(`${sessionId} ${runId} `))).toEqual([`${sessionId} ${runId} ${ended.events.at(-1)!.id} 12 7 `]);
    } finally {
      await listener.end();
    }
  });

  it('answers a core of the previous version, which does not ask for numbered events, with every event row whole, open and move', async () => {
    const { runId } = await newRun();
    const { numbered, ...open } = openCallArg(opening(runId, 'tc_tcc_previous'))!;
    expect(numbered).toBe(true);
    const [row] = await em().execute<{ r: { appended: { seq: number; type: string; payload: Record<string, unknown> }[]; numbered?: unknown } }[]>(
      "SELECT abc_open_tool_call(?::jsonb, '') AS r",
      [JSON.stringify(open)],
    );
    expect(row!.r.numbered).toBeUndefined();
    const { numbered: asked, ...move } = moveCallArg({ toolCallId: 'tc_tcc_previous', runId, from: 'RUNNING', hop: { trigger: 'succeed' }, patch: { result: 1 } })!;
    expect(asked).toBe(true);
    const [moved] = await em().execute<typeof row[]>("SELECT abc_move_tool_call(?::jsonb, '') AS r", [JSON.stringify(move)]);
    expect(moved!.r.numbered).toBeUndefined();
    const log = await readEvents(em(), { runId }, '0', 100);
    expect(log).toHaveLength(7);
    expect([...row!.r.appended, ...moved!.r.appended].map((e) => [e.seq, e.type, e.payload])).toEqual(log.map((e) => [e.seq, e.type, e.payload]));
  });

  it('tries a refused statement again one commit at a time: a move the row refuses fails no other', async () => {
    const { runId } = await newRun();
    const shared = committer();
    await openCall(shared, opening(runId, 'tc_tcc_done', `${runId}:echo:done`));
    await moveCall(shared, { toolCallId: 'tc_tcc_done', runId, from: 'RUNNING', hop: { trigger: 'succeed' }, patch: { result: 1 } });
    const calls: string[] = [];
    counted(calls);
    const [first, refused, last] = await Promise.all([
      openCall(shared, opening(runId, 'tc_tcc_before', `${runId}:echo:before`)),
      // The call is no longer RUNNING: abc_move_tool_call refuses (ABC01), and the statement rolls back.
      moveCall(shared, { toolCallId: 'tc_tcc_done', runId, from: 'RUNNING', hop: { trigger: 'succeed' }, patch: { result: 2 } }),
      openCall(shared, opening(runId, 'tc_tcc_after', `${runId}:echo:after`)),
    ]);
    expect(calls).toHaveLength(4);
    expect(first?.call.status).toBe('RUNNING');
    expect(refused).toBeUndefined();
    expect(last?.call.status).toBe('RUNNING');
    expect((await written(runId, 'tc_tcc_done')).calls).toEqual([{ status: 'SUCCEEDED', version: 5 }]);
  });

  it('keeps the one-argument functions for cores of the previous version: the row as written, none when nothing was', async () => {
    const { runId } = await newRun();
    const old = (fn: string, arg: unknown) => em().execute<{ tool_call_id: string; status: string; version: number }[]>(`SELECT * FROM ${fn}(?::jsonb)`, [JSON.stringify(arg)]);
    expect(await old('abc_open_tool_call', openCallArg(opening(runId, 'tc_tcc_old')))).toMatchObject([{ tool_call_id: 'tc_tcc_old', status: 'RUNNING', version: 4 }]);
    expect(await old('abc_open_tool_call', openCallArg(opening(runId, 'tc_tcc_old_again')))).toEqual([]);
    const end = moveCallArg({ toolCallId: 'tc_tcc_old', runId, from: 'RUNNING', hop: { trigger: 'succeed' }, patch: { result: 1 } });
    expect(await old('abc_move_tool_call', end)).toMatchObject([{ tool_call_id: 'tc_tcc_old', status: 'SUCCEEDED', version: 5 }]);
    // A refused move raises, as it always has; the caller's guard turns it into "nothing written".
    await expect(old('abc_move_tool_call', end)).rejects.toThrow('abc_move_tool_call: the call is not RUNNING');
    expect((await written(runId, 'tc_tcc_old')).events).toEqual(['tool_call_created', 'tool_call_state', 'tool_call_state', 'tool_call_state', 'execution_state', 'tool_call_state', 'execution_state']);
  });

  it('writes nothing under a live key: the caller answers with the first call', async () => {
    const { runId } = await newRun();
    await openCall(committer(), opening(runId, 'tc_tcc_first'));
    const before = await written(runId, 'tc_tcc_second');
    expect(await openCall(committer(), opening(runId, 'tc_tcc_second'))).toBeUndefined();
    expect(await written(runId, 'tc_tcc_second')).toEqual(before);
    expect(before.keys).toEqual([{ response: { tool_call_id: 'tc_tcc_first' } }]);
  });

  it('writes nothing, not even the key, for a run that ended', async () => {
    const { runId } = await newRun('CANCELLED');
    expect(await openCall(committer(), opening(runId, 'tc_tcc_ended'))).toBeUndefined();
    expect(await written(runId, 'tc_tcc_ended')).toEqual({ calls: [], contracts: [], keys: [], events: [] });
  });

  it('writes nothing when an irreversible action of the key completed in the session', async () => {
    const { runId, sessionId } = await newRun();
    await em().execute(
      "INSERT INTO execution_contracts (execution_id, tenant_id, session_id, run_id, subject_id, action_type, action_summary, status, irreversible, idempotency_key) VALUES ('exe_tcc_done', 'default', ?, ?, 'tc_tcc_before', 'tool_call', 'echo', 'completed', true, 'send-once')",
      [sessionId, runId],
    );
    expect(await openCall(committer(), opening(runId, 'tc_tcc_again', 'send-once'))).toBeUndefined();
    expect((await written(runId, 'tc_tcc_again')).calls).toEqual([]);
    expect(await em().execute("SELECT 1 FROM idempotency_keys WHERE key = 'send-once'")).toEqual([]);
  });

  it("checks a key's completed irreversible action without reading the session's other contracts", async () => {
    const { runId, sessionId } = await newRun();
    // One transaction on a client of its own, which the committer's statements run in.
    const client = await (await nativePool(orm())).connect();
    let read: number;
    try {
      await client.query('BEGIN');
      const inTx = new CallCommitter(client, '');
      // The contract rows this transaction has read so far.
      const readSoFar = async () => {
        const { rows } = await client.query<{ n: string }>("SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) AS n FROM pg_stat_xact_user_tables WHERE relname = 'execution_contracts'");
        return Number(rows[0]!.n);
      };
      // PL/pgSQL settles on one generic plan per connection, made while the table was young.
      await client.query('SET LOCAL plan_cache_mode = force_generic_plan');
      await openCall(inTx, opening(runId, 'tc_tcc_young', 'a-first-key'));
      await client.query(
        `INSERT INTO execution_contracts (execution_id, tenant_id, session_id, run_id, subject_id, action_type, action_summary, status, irreversible, idempotency_key)
         SELECT 'exe_tcc_many_' || g, 'default', $1, $2, 'tc_tcc_many_' || g, 'tool_call', 'echo', CASE WHEN g % 2 = 0 THEN 'completed' ELSE 'running' END, g % 3 = 0, 'key-' || g
         FROM generate_series(1, 2000) g`,
        [sessionId, runId],
      );
      const before = await readSoFar();
      expect((await openCall(inTx, opening(runId, 'tc_tcc_many_new', 'a-new-key')))?.call).toMatchObject({ status: 'RUNNING' });
      read = (await readSoFar()) - before;
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    // abc_open_tool_call reads no contract to open a call under a new key: its check finds nothing in the index.
    expect(read).toBe(0);
    // A key whose irreversible action completed in the session still refuses.
    expect(await openCall(committer(), opening(runId, 'tc_tcc_many_done', 'key-6'))).toBeUndefined();
  });

  it("moves a call's contract without new entries in the contracts' indexes (HOT updates)", async () => {
    const { runId } = await newRun();
    const client = await (await nativePool(orm())).connect();
    let updates: { n_tup_upd: number; n_tup_hot_upd: number };
    // The backend's counts may hold its earlier transactions' too: these updates' are the difference.
    const counts = async () =>
      (await client.query<{ n_tup_upd: number; n_tup_hot_upd: number }>("SELECT n_tup_upd::int AS n_tup_upd, n_tup_hot_upd::int AS n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = 'execution_contracts'")).rows[0]!;
    try {
      await client.query('BEGIN');
      const before = await counts();
      const inTx = new CallCommitter(client, '');
      for (let i = 0; i < 20; i++) {
        await openCall(inTx, opening(runId, `tc_tcc_hot_${i}`, `hot-${i}`));
        await moveCall(inTx, { toolCallId: `tc_tcc_hot_${i}`, runId, from: 'RUNNING', hop: { trigger: 'succeed' }, patch: { result: i } });
      }
      const after = await counts();
      updates = { n_tup_upd: after.n_tup_upd - before.n_tup_upd, n_tup_hot_upd: after.n_tup_hot_upd - before.n_tup_hot_upd };
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    // No index names `status`: an update is HOT unless its row's page is full (at most a row or two of 20 here).
    expect(updates.n_tup_upd).toBe(20);
    expect(updates.n_tup_hot_upd).toBeGreaterThanOrEqual(15);
  });

  it('writes nothing for a call in another state than the hop starts from', async () => {
    const { runId } = await newRun();
    await openCall(committer(), opening(runId, 'tc_tcc_late'));
    // The deadline sweeper timed it out first.
    await em().execute("UPDATE tool_calls SET status = 'TIMEOUT' WHERE tool_call_id = 'tc_tcc_late'");
    const before = await written(runId, 'tc_tcc_late');
    expect(await moveCall(committer(), { toolCallId: 'tc_tcc_late', runId, from: 'RUNNING', hop: { trigger: 'succeed' }, patch: { result: 1 } })).toBeUndefined();
    expect(await written(runId, 'tc_tcc_late')).toEqual(before);
  });

  it('keeps the move when its fact cannot be written, and says why on the execution_state event', async () => {
    const { runId } = await newRun();
    await openCall(committer(), opening(runId, 'tc_tcc_fact'));
    await em().execute(`CREATE FUNCTION refuse_fact() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'memory is down'; END $$`);
    await em().execute('CREATE TRIGGER refuse_fact BEFORE INSERT ON memory FOR EACH ROW EXECUTE FUNCTION refuse_fact()');
    try {
      const ended = await moveCall(committer(), { toolCallId: 'tc_tcc_fact', runId, from: 'RUNNING', hop: { trigger: 'fail' }, patch: { error: { code: 'tool_failed', message: 'it broke' } } });
      expect(ended!.call).toMatchObject({ status: 'FAILED', error: { code: 'tool_failed', message: 'it broke' } });
    } finally {
      await em().execute('DROP TRIGGER refuse_fact ON memory; DROP FUNCTION refuse_fact()');
    }
    const [last] = (await readEvents(em(), { runId, types: ['execution_state'] }, '0', 100)).slice(-1);
    expect(last!.payload).toMatchObject({ from_status: 'running', to_status: 'failed', is_terminal: true, fact_error: expect.stringContaining('memory is down') });
    expect(await em().execute("SELECT status, error_message FROM execution_contracts WHERE subject_id = 'tc_tcc_fact'")).toEqual([{ status: 'failed', error_message: 'it broke' }]);
  });
});

describe('the timer sweeps', () => {
  it('find overdue and orphaned calls without reading the ended ones, however many there are', async () => {
    const { runId } = await newRun();
    const sweep = em();
    const rolledBack = new Error('roll back');
    let found: { overdue: string[]; orphans: string[]; read: number } | undefined;
    await expect(
      sweep.transactional(async (tx) => {
        const insert = (ids: string, status: string, deadline: string, created = 'now()') =>
          tx.execute(
            `INSERT INTO tool_calls (tool_call_id, run_id, tool_name, kind, status, created_at, deadline_at, version)
             SELECT 'tc_sweep_' || g, ?, 'echo', 'builtin', ?, ${created}, ${deadline}, 1 FROM generate_series(${ids}) g`,
            [runId, status],
          );
        // Ended calls keep their past deadlines.
        await insert('1, 3000', 'SUCCEEDED', "now() - interval '1 hour'", "now() - interval '2 hours'");
        await insert('3001, 3001', 'RUNNING', "now() - interval '1 second'");
        await insert('3002, 3002', 'DISPATCHED', "now() + interval '1 hour'", "now() - interval '1 minute'");
        await insert('3003, 3003', 'RUNNING', "now() + interval '1 hour'");
        await tx.execute('ANALYZE tool_calls');
        // The tool_calls rows this transaction has read so far.
        const readSoFar = async () => {
          const [row] = await tx.execute<{ n: string }[]>("SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) AS n FROM pg_stat_xact_user_tables WHERE relname = 'tool_calls'");
          return Number(row!.n);
        };
        const before = await readSoFar();
        const overdue = await overdueCalls(tx);
        const orphans = await orphanCalls(tx, ['client']);
        found = { overdue, orphans, read: (await readSoFar()) - before };
        throw rolledBack;
      }),
    ).rejects.toBe(rolledBack);
    expect(found).toEqual({ overdue: ['tc_sweep_3001'], orphans: ['tc_sweep_3002'], read: expect.any(Number) });
    // The three open calls, each read at most once by each sweep.
    expect(found!.read).toBeLessThanOrEqual(6);
  });
});

describe('idempotency key retention', () => {
  it('deletes expired keys in batches, keeping the live ones and one a claim holds', async () => {
    const keys = async () => (await em().execute<{ key: string }[]>("SELECT key FROM idempotency_keys WHERE key LIKE 'retain-%' ORDER BY key")).map((r) => r.key);
    await em().execute(
      `INSERT INTO idempotency_keys (scope, key, request_hash, expires_at)
       SELECT 'tool_call', 'retain-old-' || g, 'h', now() - interval '1 minute' FROM generate_series(1, 2500) g
       UNION ALL SELECT 'tool_call', 'retain-live-' || g, 'h', now() + interval '1 hour' FROM generate_series(1, 2) g
       UNION ALL SELECT 'tool_call', 'retain-held', 'h', now() - interval '1 minute'`,
    );
    // A claim that found the key locks its row until it commits.
    const holder = await (await nativePool(orm())).connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT 1 FROM idempotency_keys WHERE scope = 'tool_call' AND key = 'retain-held' FOR UPDATE");
      // At most two batches a sweep: a backlog drains over several.
      expect(await inBatches((n) => deleteExpiredIdempotencyKeys(em(), n), 1000, 2)).toBe(2000);
      expect(await inBatches((n) => deleteExpiredIdempotencyKeys(em(), n), 1000)).toBe(500);
      expect(await keys()).toEqual(['retain-held', 'retain-live-1', 'retain-live-2']);
      await holder.query('COMMIT');
    } finally {
      holder.release();
    }
    expect(await inBatches((n) => deleteExpiredIdempotencyKeys(em(), n), 1000)).toBe(1);
    expect(await keys()).toEqual(['retain-live-1', 'retain-live-2']);
  });
});

describe('tool metrics', () => {
  it("reads a window's calls, not every call ever made", async () => {
    const { runId } = await newRun();
    const client = await (await nativePool(orm())).connect();
    try {
      await client.query('BEGIN');
      // Parallel workers' reads would not count in this transaction's statistics.
      await client.query('SET LOCAL max_parallel_workers_per_gather = 0');
      await client.query(
        `INSERT INTO tool_calls (tool_call_id, run_id, tool_name, kind, status, created_at, started_at, completed_at, version)
         SELECT 'tc_window_' || g, $1, CASE WHEN g > 60000 THEN 'recent' ELSE 'old' END, 'builtin', 'SUCCEEDED',
                CASE WHEN g > 60000 THEN now() ELSE now() - interval '30 days' + g * interval '1 second' END, now(), now(), 1
         FROM generate_series(1, 60005) g`,
        [runId],
      );
      // What vacuum does for the ranges a write filled (autosummarize).
      await client.query("SELECT brin_summarize_new_values('idx_tool_calls_created')");
      await client.query('ANALYZE tool_calls, runs');
      const read = async () => {
        const { rows } = await client.query<{ n: string }>("SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) AS n FROM pg_stat_xact_user_tables WHERE relname = 'tool_calls'");
        return Number(rows[0]!.n);
      };
      const before = await read();
      const tools = await toolMetrics(client as unknown as pg.Pool, 'default', Date.now() - 3_600_000);
      expect(tools.filter((t) => t.tool_name === 'recent' || t.tool_name === 'old')).toMatchObject([{ tool_name: 'recent', total: 5 }]);
      // The last block ranges, not the 60,000 older calls.
      expect((await read()) - before).toBeLessThan(10_000);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });
});
