// A run's start and its completion in one statement each (abc_start_run,
// abc_complete_run); a session of another user or a run that is not running
// makes them write nothing, for the caller's transactional path to decide.
// The records themselves are pinned field by field in runs.int.test.ts, which
// the transactional path passes too.
import { describe, expect, it } from 'vitest';
import { EVENTS_CHANNEL, readEvents } from '../../src/store/event-log.js';
import { completeRun, startRun, type NewRun } from '../../src/store/run-store.js';
import { listMessages } from '../../src/store/session-store.js';
import { countedDatabase } from '../support/db.js';
import { listen } from '../support/notifications.js';

const { em, counted, orm } = countedDatabase();
const newRun = (runId: string, sessionId: string, userId = 'u1'): NewRun => ({
  runId, sessionId, agentId: 'agent', traceId: 't'.repeat(32), tokenHash: `hash-${runId}`, userId, tenantId: 'default', lease: { owner: 'core_a', ms: 15_000 },
});
const written = async (runId: string) => ({
  runs: await em().execute('SELECT status, version FROM runs WHERE run_id = ?', [runId]),
  messages: await em().execute('SELECT role, content FROM messages WHERE run_id = ? ORDER BY created_at', [runId]),
  events: (await readEvents(em(), { runId }, '0', 100)).map((e) => e.type),
});

describe('a run in one statement each', () => {
  it('starts with its session, its message and its first events, and completes', async () => {
    const calls: string[] = [];
    const started = await startRun(counted(calls), newRun('run_rc_1', 'sess_rc_1'), 'hi', [{ type: 'user_input' }, { type: 'run_started' }]);
    expect(calls).toEqual(["SELECT abc_start_run($1::jsonb || jsonb_build_object('events', $2::jsonb)) AS r"]);
    expect(started!.run).toMatchObject({ runId: 'run_rc_1', sessionId: 'sess_rc_1', status: 'RUNNING', userId: 'u1', startedAt: expect.any(Date) });
    const [first, second] = await readEvents(em(), { runId: 'run_rc_1' }, '0', 2);
    expect(started!.firstId).toBe(first!.id);
    expect(started!.events).toEqual([first, second]);
    expect(await em().execute("SELECT user_id, tenant_id FROM sessions WHERE session_id = 'sess_rc_1'")).toEqual([{ user_id: 'u1', tenant_id: 'default' }]);

    calls.length = 0;
    const ended = await completeRun(counted(calls), started!.run, { content: 'bye' }, [{ type: 'run_done' }]);
    expect(calls).toEqual(["SELECT abc_complete_run($1::jsonb || jsonb_build_object('events', $2::jsonb)) AS r"]);
    expect(ended!.run).toMatchObject({ status: 'DONE', endedAt: expect.any(Date) });
    expect(ended!.events).toEqual(await readEvents(em(), { runId: 'run_rc_1' }, first!.id, 10).then((events) => events.slice(1)));
    expect(await written('run_rc_1')).toEqual({
      runs: [{ status: 'DONE', version: 3 }],
      messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'bye' }],
      events: ['user_input', 'run_started', 'run_done'],
    });
  });

  it("numbers a run's events after its session's, and notifies as every append does", async () => {
    const first = await startRun(em(), newRun('run_rc_9', 'sess_rc_9'), 'one', [{ type: 'user_input' }, { type: 'run_started' }]);
    await completeRun(em(), first!.run, { content: 'done' }, [{ type: 'run_done', payload: { text: 'done' } }]);
    const listener = await listen(orm().config.get('clientUrl'), EVENTS_CHANNEL);
    try {
      const started = (await startRun(em(), newRun('run_rc_10', 'sess_rc_9'), 'two', [{ type: 'user_input', payload: { at: undefined, n: 2 } }, { type: 'run_started' }]))!;
      const ended = (await completeRun(em(), started.run, { content: 'bye' }, [{ type: 'run_done', payload: { text: 'bye' } }]))!;
      expect([...started.events, ...ended.events].map((e) => [e.seq, e.sessionSeq])).toEqual([[1, 4], [2, 5], [3, 6]]);
      expect([...started.events, ...ended.events]).toEqual(await readEvents(em(), { runId: 'run_rc_10' }, '0', 10));
      expect(started.events[0]!.payload).toEqual({ n: 2 });
      await expect.poll(() => listener.payloads().filter((p) => p.startsWith('sess_rc_9 run_rc_10 '))).toEqual([
        `sess_rc_9 run_rc_10 ${started.events[1]!.id} 5 2 `,
        `sess_rc_9 run_rc_10 ${ended.events[0]!.id} 6 3 `,
      ]);
    } finally {
      await listener.end();
    }
  });

  it('answers a core of the previous version, which does not ask for numbered events, with every event row whole', async () => {
    const arg = (runId: string) => ({
      run: { run_id: runId, session_id: 'sess_rc_11', agent_id: 'agent', status: 'RUNNING', hops: 1, trace_id: 't'.repeat(32), token_hash: `hash-${runId}`, user_id: 'u1', tenant_id: 'default', lease_owner: 'core_a', lease_ms: 15_000 },
      message: { message_id: `msg_${runId}`, content: 'hi' },
      events: [{ event_id: `evt_${runId}_1`, run_id: runId, i: 1, ts: 1, type: 'user_input', payload: { n: 1 } }],
      wanted: [{ run_id: runId, n: 1, active: false }],
      channel: EVENTS_CHANNEL,
      origin: '',
    });
    type Whole = { seq: number; type: string; payload: Record<string, unknown> };
    const [started] = await em().execute<{ r: { first_id: string; events: Whole[]; numbered?: unknown } }[]>('SELECT abc_start_run(?::jsonb) AS r', [JSON.stringify(arg('run_rc_11'))]);
    expect(started!.r.numbered).toBeUndefined();
    const [ended] = await em().execute<{ r: { appended: Whole[]; numbered?: unknown } }[]>('SELECT abc_complete_run(?::jsonb) AS r', [
      JSON.stringify({ run_id: 'run_rc_11', from: 'RUNNING', to: 'DONE', message: { message_id: 'msg_rc_11_end', content: 'bye' }, ended_channel: 'abc_run_ended', events: [{ event_id: 'evt_rc_11_2', run_id: 'run_rc_11', i: 1, ts: 2, type: 'run_done', payload: {} }], wanted: [{ run_id: 'run_rc_11', n: 1, active: false }], channel: EVENTS_CHANNEL, origin: '' }),
    ]);
    expect(ended!.r.numbered).toBeUndefined();
    const log = await readEvents(em(), { runId: 'run_rc_11' }, '0', 10);
    expect(started!.r.first_id).toBe(log[0]!.id);
    expect([...started!.r.events, ...ended!.r.appended].map((e) => [e.seq, e.type, e.payload])).toEqual(log.map((e) => [e.seq, e.type, e.payload]));
  });

  it('writes nothing in a session of another user', async () => {
    await startRun(em(), newRun('run_rc_2', 'sess_rc_2', 'owner'), 'mine', [{ type: 'user_input' }]);
    expect(await startRun(em(), newRun('run_rc_3', 'sess_rc_2', 'intruder'), 'theirs', [{ type: 'user_input' }])).toBeUndefined();
    expect(await written('run_rc_3')).toEqual({ runs: [], messages: [], events: [] });
    expect(await em().execute("SELECT event_head FROM sessions WHERE session_id = 'sess_rc_2'")).toEqual([{ event_head: '1' }]);
  });

  it('answers the transcript of a session it opened, and none of a session that was there', async () => {
    const opened = await startRun(em(), newRun('run_rc_5', 'sess_rc_5'), 'first turn', [{ type: 'user_input' }]);
    expect(opened!.transcript).toEqual((await listMessages(em(), 'sess_rc_5', 10)).messages);
    await completeRun(em(), opened!.run, { content: 'answer' }, [{ type: 'run_done' }]);
    const next = await startRun(em(), newRun('run_rc_6', 'sess_rc_5'), 'second turn', [{ type: 'user_input' }]);
    expect(next!.transcript).toBeUndefined();
  });

  it("refuses a run past its tenant's limit of runs going, in the same statement, writing nothing", async () => {
    await startRun(em(), newRun('run_rc_8', 'sess_rc_8'), 'going', [{ type: 'user_input' }]);
    const going = Number((await em().execute<{ n: string }[]>("SELECT count(*) AS n FROM runs WHERE tenant_id = 'default' AND status NOT IN ('DONE', 'FAILED', 'CANCELLED')"))[0]!.n);
    const calls: string[] = [];
    await expect(startRun(counted(calls), newRun('run_rc_7', 'sess_rc_7'), 'one too many', [{ type: 'user_input' }], '', going)).rejects.toMatchObject({
      status: 'RESOURCE_EXHAUSTED',
      payload: { code: 'rate_limited', retryable: true, details: { limit: 'tenant_runs', max_runs: going } },
    });
    expect(calls).toHaveLength(1);
    expect(await written('run_rc_7')).toEqual({ runs: [], messages: [], events: [] });
    expect(await em().execute("SELECT 1 FROM sessions WHERE session_id = 'sess_rc_7'")).toEqual([]);
    expect(await startRun(em(), newRun('run_rc_7', 'sess_rc_7'), 'within it', [{ type: 'user_input' }], '', going + 1)).toMatchObject({ run: { status: 'RUNNING' } });
  });

  it('writes nothing for a run that is not running', async () => {
    const started = await startRun(em(), newRun('run_rc_4', 'sess_rc_4'), 'wait', [{ type: 'user_input' }]);
    await em().execute("UPDATE runs SET status = 'PAUSED_WAITING_APPROVAL' WHERE run_id = 'run_rc_4'");
    const before = await written('run_rc_4');
    expect(await completeRun(em(), started!.run, { content: 'done early' }, [{ type: 'run_done' }])).toBeUndefined();
    expect(await written('run_rc_4')).toEqual(before);
  });
});
