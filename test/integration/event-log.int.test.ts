// The event log's append: one statement, alone or in a caller's transaction, or
// shared among runs; and its watchers, which take this process's batches from
// memory and read the log for everything else.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallCommitter } from '../../src/store/call-committer.js';
import { EventAppender } from '../../src/store/event-appender.js';
import { EventWriter, MAX_COALESCED_TEXT } from '../../src/orchestrator/event-writer.js';
import { EventBus, LISTENER_APPLICATION, RUN_ENDED_CHANNEL } from '../../src/store/event-bus.js';
import { appendEvents, EVENTS_CHANNEL, matches, readEvents, readWatched, type StoredEvent } from '../../src/store/event-log.js';
import { watchEvents } from '../../src/store/event-watch.js';
import { completeRun, firstEventId, resumeState, startRun, type NewRun } from '../../src/store/run-store.js';
import { moveCall, openCall, type OpenCall } from '../../src/orchestrator/tool-call-commits.js';
import { poolOf, type Queryable } from '../../src/store/native.js';
import type { Orm } from '../../src/store/orm.js';
import { migratedOrm } from '../support/db.js';
import { testLogger } from '../support/log.js';
import { listen, type Listening } from '../support/notifications.js';

let store: Awaited<ReturnType<typeof migratedOrm>>;
let orm: Orm;
let n = 0;

beforeAll(async () => {
  store = await migratedOrm();
  orm = store.orm;
});
afterAll(() => store.close());

async function newRun(status = 'STREAMING', session?: string): Promise<{ runId: string; sessionId: string }> {
  const sessionId = session ?? `sess_log_${++n}`;
  const runId = `run_log_${++n}`;
  const em = orm.em.fork();
  if (!session) await em.execute('INSERT INTO sessions (session_id, user_id, tenant_id) VALUES (?, ?, ?)', [sessionId, 'u', 'default']);
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

  it('finds a run\'s first and last cursors by seq, among parallel appends of its session\'s runs', async () => {
    const { runId, sessionId } = await newRun();
    const other = await newRun('STREAMING', sessionId);
    const batch = [{ type: 'delta', payload: {} }, { type: 'delta', payload: {} }];
    await Promise.all(Array.from({ length: 8 }, (_, i) => appendEvents(orm.em.fork(), i % 2 ? runId : other.runId, batch)));
    const [ids] = await orm.em.fork().execute<{ first: string; last: string }[]>('SELECT min(id)::text AS first, max(id)::text AS last FROM events WHERE run_id = ?', [runId]);
    expect(await firstEventId(orm.em.fork(), runId)).toBe(ids!.first);
    expect((await resumeState(orm.em.fork(), runId)).last_cursor).toBe(ids!.last);
    expect(await firstEventId(orm.em.fork(), (await newRun()).runId)).toBeUndefined();
  });

  it("reads a run's events after any cursor in cursor order, whether the cursor is the run's, another run's, or before or past it", async () => {
    const { runId, sessionId } = await newRun();
    const other = await newRun('STREAMING', sessionId);
    const batch = (i: number) => [{ type: 'delta', payload: { i } }, { type: i % 3 ? 'delta' : 'run_note', payload: { i } }];
    for (let i = 0; i < 6; i++) await Promise.all([appendEvents(orm.em.fork(), runId, batch(i)), appendEvents(orm.em.fork(), other.runId, batch(i))]);
    const log = await readEvents(orm.em.fork(), { sessionId }, '0', 100);
    const cursors = ['0', ...log.map((e) => e.id), String(BigInt(log.at(-1)!.id) + 1n)];
    for (const filter of [{ runId }, { runId, types: ['run_note'] }, { runId, excludeTypes: ['run_note'] }]) {
      for (const cursor of cursors) {
        const wanted = log.filter((e) => e.runId === runId && BigInt(e.id) > BigInt(cursor) && matches(filter, e)).slice(0, 3);
        expect(await readEvents(orm.em.fork(), filter, cursor, 3)).toEqual(wanted);
        expect((await readWatched(poolOf(orm), filter, cursor, 3)).events).toEqual(wanted);
      }
    }
  });

  it('answers with the events as the log holds them, built from what it sent', async () => {
    const { runId, sessionId } = await newRun();
    // Keys jsonb reorders, a dropped undefined, a nested document, a number written as 1.50.
    const payloads = [{ zz: 1, a: { y: [1, { b: 'x' }], c: null }, skip: undefined }, { price: 1.5, text: 'é "quoted" \\ line\n' }, {}];
    const sent = await appendEvents(orm.em.fork(), runId, [...payloads.map((payload) => ({ type: 'delta', payload })), { type: 'run_note' }]);
    const log = await readEvents(orm.em.fork(), { sessionId }, '0', 100);
    expect(sent).toStrictEqual(log);
    expect(sent.map((e) => e.payload)).toEqual([{ zz: 1, a: { y: [1, { b: 'x' }], c: null } }, { price: 1.5, text: 'é "quoted" \\ line\n' }, {}, {}]);
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

const delta = (text: string) => ({ type: 'agent_stream_delta', payload: { text }, eventId: `evt_${text}_${++n}` });

describe('the shared append', () => {
  it('commits the batches of many runs at once, each run and session gap-free and in cursor order', async () => {
    const a = await newRun();
    const b = await newRun('STREAMING', a.sessionId);
    const c = await newRun();
    const ended = await newRun('DONE');
    const appender = new EventAppender(poolOf(orm));
    const appends = [];
    for (let i = 0; i < 30; i++) for (const run of [a, b, c, ended]) appends.push(appender.append(run.runId, [delta(`${i}a`), delta(`${i}b`)], true));
    const answers = await Promise.all(appends);
    expect(answers.filter((events) => events.length === 0)).toHaveLength(30); // the ended run's
    // Fewer commits than batches: the batches arriving together went out together.
    const [commits] = await orm.em.fork().execute<{ n: number }[]>('SELECT count(DISTINCT xmin::text)::int AS n FROM events WHERE session_id IN (?, ?)', [a.sessionId, c.sessionId]);
    expect(commits!.n).toBeLessThan(90);
    for (const sessionId of [a.sessionId, c.sessionId]) {
      const log = await readEvents(orm.em.fork(), { sessionId }, '0', 1000);
      expect(log.map((e) => e.sessionSeq)).toEqual(log.map((_, i) => i + 1));
      for (const run of [a, b, c]) {
        const seqs = log.filter((e) => e.runId === run.runId).map((e) => e.seq);
        expect(seqs).toEqual(seqs.map((_, i) => i + 1));
      }
    }
    expect(await readEvents(orm.em.fork(), { runId: ended.runId }, '0', 10)).toEqual([]);
  });

  it('fails only the batch the database refuses', async () => {
    const a = await newRun();
    const b = await newRun();
    const appender = new EventAppender(poolOf(orm));
    const good = appender.append(a.runId, [delta('fine')], true);
    // PostgreSQL's jsonb refuses a NUL character.
    const bad = appender.append(b.runId, [{ type: 'agent_stream_delta', payload: { text: 'nul \u0000 here' }, eventId: `evt_bad_${++n}` }], true);
    expect(await good).toHaveLength(1);
    await expect(bad).rejects.toThrow();
    expect((await readEvents(orm.em.fork(), { runId: a.runId }, '0', 10)).map((e) => e.payload)).toEqual([{ text: 'fine' }]);
  });
});

describe("a run's writer", () => {
  it('commits a quiet stream delta by delta, and stores what queued during a commit as one delta, in order', async () => {
    const { runId } = await newRun();
    const writer = new EventWriter(new EventAppender(poolOf(orm)), runId);
    writer.push(delta('alone'));
    await writer.flush();
    // A burst, pushed in one turn as a chunk of SSE is parsed; a state ends a delta's run of joins.
    for (let i = 0; i < 50; i++) writer.push(delta(`w${i} `));
    writer.push({ type: 'agent_state', payload: { state: 'thinking' } });
    for (let i = 50; i < 60; i++) writer.push(delta(`w${i} `));
    await writer.flush();
    const log = await readEvents(orm.em.fork(), { runId }, '0', 1000);
    expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i + 1));
    expect(log[0]!.payload).toEqual({ text: 'alone' });
    const state = log.findIndex((e) => e.type === 'agent_state');
    const text = (events: typeof log) => events.map((e) => e.payload.text).join('');
    expect(text(log.slice(1, state))).toBe(Array.from({ length: 50 }, (_, i) => `w${i} `).join(''));
    expect(text(log.slice(state + 1))).toBe(Array.from({ length: 10 }, (_, i) => `w${i + 50} `).join(''));
    expect(log.slice(1, state).length).toBeLessThan(50);
    expect(log.slice(state + 1)).toHaveLength(1);
  });

  it('starts a new delta past the most text one carries, and never joins a delta with more than text', async () => {
    const { runId } = await newRun();
    const writer = new EventWriter(new EventAppender(poolOf(orm)), runId);
    const big = 'x'.repeat(MAX_COALESCED_TEXT / 2 + 1);
    writer.push(delta('first'));
    writer.push({ type: 'agent_stream_delta', payload: { text: big } });
    writer.push({ type: 'agent_stream_delta', payload: { text: big } });
    writer.push({ type: 'agent_stream_delta', payload: { text: 'tagged', channel: 'aside' } });
    writer.push(delta('last'));
    await writer.flush();
    const log = await readEvents(orm.em.fork(), { runId }, '0', 100);
    expect(log.map((e) => e.payload)).toEqual([{ text: `first${big}` }, { text: big }, { text: 'tagged', channel: 'aside' }, { text: 'last' }]);
  });
});

/** The backends of this database's event bus listeners. */
async function listenerPids(): Promise<number[]> {
  const rows = await orm.em.fork().execute<{ pid: number }[]>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = ?', [LISTENER_APPLICATION]);
  return rows.map((r) => r.pid);
}

describe('watching', () => {
  let bus: EventBus;
  beforeAll(async () => {
    bus = await EventBus.start(store.db.url, testLogger());
  });
  afterAll(() => bus.close());

  /** The pool, counting the reads a watcher makes. */
  const counted = (): { db: Queryable; reads: () => number } => {
    const pool = poolOf(orm);
    let reads = 0;
    return { db: { query: (config) => (reads++, pool.query(config)) }, reads: () => reads };
  };

  async function collect(watch: AsyncGenerator<StoredEvent>, count: number): Promise<StoredEvent[]> {
    const seen: StoredEvent[] = [];
    for await (const event of watch) if (seen.push(event) >= count) break;
    return seen;
  }

  it('takes this process’s batches from memory, with no read', async () => {
    const { runId, sessionId } = await newRun();
    const appender = new EventAppender(poolOf(orm), bus);
    await appender.append(runId, [delta('before')], true);
    const { db, reads } = counted();
    const controller = new AbortController();
    const watched = collect(watchEvents(() => db, bus, { filter: { sessionId }, cursor: '0', signal: controller.signal }), 41);
    await new Promise((r) => setTimeout(r, 100)); // the first read is made
    for (let i = 0; i < 40; i++) await appender.append(runId, [delta(`live${i}`)], true);
    const seen = await watched;
    controller.abort();
    expect(seen.map((e) => e.payload.text)).toEqual(['before', ...Array.from({ length: 40 }, (_, i) => `live${i}`)]);
    expect(reads()).toBe(1);
  });

  it('yields every event once, in cursor order, when local batches, other writers and gaps interleave', async () => {
    const a = await newRun();
    const b = await newRun('STREAMING', a.sessionId);
    const appender = new EventAppender(poolOf(orm), bus);
    // Another core: its own appender, announced only by notification.
    const otherBus = await EventBus.start(store.db.url, testLogger());
    const other = new EventAppender(poolOf(orm), otherBus);
    const watches = ['0', '0'].map(() => {
      const controller = new AbortController();
      return { controller, seen: collect(watchEvents(() => poolOf(orm), bus, { filter: { sessionId: a.sessionId }, cursor: '0', signal: controller.signal }), 200) };
    });
    const runWatch = collect(watchEvents(() => poolOf(orm), bus, { filter: { runId: b.runId }, cursor: '0', signal: new AbortController().signal }), 100);
    await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        await appender.append(a.runId, [delta(`a${i}`)], true);
        await other.append(b.runId, [delta(`b${i}`)], true);
        await orm.em.fork().transactional((tx) => appendEvents(tx, a.runId, [delta(`t${i}`)]));
        await appender.append(b.runId, [delta(`c${i}`)], true);
      }),
    );
    const log = await readEvents(orm.em.fork(), { sessionId: a.sessionId }, '0', 1000);
    expect(log).toHaveLength(200);
    for (const watch of watches) {
      expect((await watch.seen).map((e) => e.id)).toEqual(log.map((e) => e.id));
      watch.controller.abort();
    }
    expect((await runWatch).map((e) => e.id)).toEqual(log.filter((e) => e.runId === b.runId).map((e) => e.id));
    await otherBus.close();
  });

  it('starts with the events a run’s start just committed and takes its completion from memory, with no read', async () => {
    const sessionId = `sess_log_${++n}`;
    const listener = await listen(store.db.url, EVENTS_CHANNEL);
    const endings = await listen(store.db.url, RUN_ENDED_CHANNEL);
    const run: NewRun = { runId: `run_log_${++n}`, sessionId, agentId: 'agent', traceId: 't'.repeat(32), tokenHash: 'h', userId: 'u', tenantId: 'default', lease: { owner: 'core', ms: 15_000 } };
    const started = (await bus.deliver(run, (origin) => startRun(orm.em.fork(), run, 'hi', [{ type: 'user_input' }, { type: 'run_started' }], origin)))!;
    const { db, reads } = counted();
    const controller = new AbortController();
    const watch = watchEvents(() => db, bus, { filter: { sessionId }, cursor: String(BigInt(started.firstId) - 1n), known: started.events, signal: controller.signal });
    const seen = [(await watch.next()).value, (await watch.next()).value];
    const ended = (await bus.deliver(run, (origin) => completeRun(orm.em.fork(), started.run, { content: 'bye' }, [{ type: 'run_done' }], origin), true))!;
    seen.push((await watch.next()).value);
    controller.abort();
    await watch.return(undefined);

    // What the watch was handed is what the log holds, field by field.
    expect(seen).toEqual(await readEvents(orm.em.fork(), { sessionId }, '0', 10));
    expect(reads()).toBe(0);
    // Both notifications name this process, whose bus passes them over, and its listener sent them after the commits.
    const ours = () => listener.notified.filter((m) => m.payload.startsWith(`${sessionId} `));
    await expect.poll(() => ours().length).toBe(2);
    await listener.end();
    expect(ours().map((m) => m.payload)).toEqual([
      `${sessionId} ${run.runId} ${started.events[1]!.id} 2 2 ${bus.origin}`,
      `${sessionId} ${run.runId} ${ended.events[0]!.id} 3 3 ${bus.origin}`,
    ]);
    expect([...new Set(listener.notified.map((m) => m.from))]).toEqual(await listenerPids());
    // So was the run's end: the completion's commit held no notification lock.
    await expect.poll(() => endings.payloads().filter((p) => p === run.runId).length).toBe(1);
    await endings.end();
    expect(endings.notified.filter((m) => m.payload === run.runId).map((m) => m.from)).toEqual(await listenerPids());
  });

  it('takes a tool call’s two commits from memory, with no read, and wakes a waiter on its run', async () => {
    const { runId, sessionId } = await newRun('RUNNING');
    const listener = await listen(store.db.url, EVENTS_CHANNEL);
    const { db, reads } = counted();
    const controller = new AbortController();
    const watched = collect(watchEvents(() => db, bus, { filter: { sessionId }, cursor: '0', signal: controller.signal }), 7);
    await expect.poll(() => reads()).toBe(1); // the first read, of an empty log
    const wakes: (number | undefined)[] = [];
    const offWake = bus.onWake(`run:${runId}`, (position) => wakes.push(position));
    const id = `tc_log_${++n}`;
    const opening: OpenCall = {
      toolCallId: id, runId, toolName: 'echo', kind: 'builtin', args: { n: 1 }, idempotencyKey: `${runId}:echo:h`, hash: 'h', ttlMs: 60_000, timeoutMs: 5000, traceparent: null,
      contract: { actionSummary: 'echo', irreversible: false, timeoutSeconds: 5 },
      created: [{ type: 'tool_call_created', payload: { tool_call_id: id } }],
      hops: [{ trigger: 'policy_checked' }, { trigger: 'dispatch' }, { trigger: 'start' }],
    };
    const committer = new CallCommitter(poolOf(orm), bus.origin);
    const opened = (await bus.deliver({ runId, sessionId }, () => openCall(committer, opening)))!;
    const ended = (await bus.deliver({ runId, sessionId }, () => moveCall(committer, { toolCallId: id, runId, from: 'RUNNING', hop: { trigger: 'succeed' }, patch: { result: 1 } })))!;
    const seen = await watched;
    controller.abort();
    offWake();

    // What the commits answered, and the watch was handed, is what the log holds, field by field.
    const log = await readEvents(orm.em.fork(), { sessionId }, '0', 10);
    expect([...opened.events, ...ended.events]).toEqual(log);
    expect(seen).toEqual(log);
    expect(reads()).toBe(1);
    expect(ended.call).toMatchObject({ toolCallId: id, status: 'SUCCEEDED', result: 1, completedAt: expect.any(Date) });
    // A waiter on the run (WakeWatch) wakes at each commit, at the position it reached.
    expect(wakes).toEqual([opened.events.at(-1)!.seq, ended.events.at(-1)!.seq]);
    // Both notifications name this process, whose bus passes them over.
    const ours = () => listener.payloads().filter((p) => p.startsWith(`${sessionId} `));
    await expect.poll(() => ours().length).toBe(2);
    await listener.end();
    expect(ours().map((p) => p.split(' ').at(-1))).toEqual([bus.origin, bus.origin]);
  });

  it('reads the log when told to reread: events this process wrote but never handed over still arrive', async () => {
    const sessionId = `sess_log_${++n}`;
    const run: NewRun = { runId: `run_log_${++n}`, sessionId, agentId: 'agent', traceId: 't'.repeat(32), tokenHash: 'h', userId: 'u', tenantId: 'default', lease: { owner: 'core', ms: 15_000 } };
    const started = (await startRun(orm.em.fork(), run, 'hi', [{ type: 'user_input' }], bus.origin))!;
    const controller = new AbortController();
    const pool = poolOf(orm);
    let reads = 0;
    const db: Queryable = { query: <R>(config: { text: string }) => pool.query<R>(config).finally(() => reads++) };
    const watch = watchEvents(() => db, bus, { filter: { sessionId }, cursor: started.events[0]!.id, signal: controller.signal });
    // As when a completion's answer is lost: committed, its notification passed over here, nothing published.
    let arrived = false;
    const next = watch.next().then((r) => ((arrived = true), r));
    await expect.poll(() => reads).toBe(1); // its first read has answered
    await completeRun(orm.em.fork(), started.run, { content: 'bye' }, [{ type: 'run_done' }], bus.origin);
    await new Promise((r) => setTimeout(r, 200));
    expect(arrived).toBe(false);
    bus.reread(run.runId, sessionId);
    expect((await next).value).toMatchObject({ type: 'run_done', runId: run.runId });
    controller.abort();
    await watch.return(undefined);
  });

  it('ends a watch of a run whose end was never announced, by asking whether the run has ended', async () => {
    const sessionId = `sess_log_${++n}`;
    const run: NewRun = { runId: `run_log_${++n}`, sessionId, agentId: 'agent', traceId: 't'.repeat(32), tokenHash: 'h', userId: 'u', tenantId: 'default', lease: { owner: 'core', ms: 15_000 } };
    const started = (await startRun(orm.em.fork(), run, 'hi', [{ type: 'user_input' }], bus.origin))!;
    const finished = async () => (await orm.em.fork().execute<{ status: string }[]>('SELECT status FROM runs WHERE run_id = ?', [run.runId]))[0]!.status === 'DONE';
    const watch = watchEvents(() => poolOf(orm), bus, { filter: { runId: run.runId }, cursor: '0', signal: new AbortController().signal, finished });
    expect((await watch.next()).value).toMatchObject({ type: 'user_input' });
    // As when the core that completed the run died before its announcements: committed under another
    // core's origin, so no notification, and handed to no watcher.
    const pending = watch.next();
    await new Promise((r) => setTimeout(r, 100));
    await completeRun(orm.em.fork(), started.run, { content: 'bye' }, [{ type: 'run_done' }], 'core_gone');
    expect((await pending).value).toMatchObject({ type: 'run_done', runId: run.runId });
    expect(await watch.next()).toEqual({ done: true, value: undefined });
  });
});

describe('announcing after the commit', () => {
  let bus: EventBus;
  let listener: Listening;
  beforeAll(async () => {
    bus = await EventBus.start(store.db.url, testLogger());
    listener = await listen(store.db.url, EVENTS_CHANNEL);
  });
  afterAll(async () => {
    await listener.end();
    await bus.close();
  });

  const batch = (runId: string, seq: number): StoredEvent[] => [{ id: String(seq), eventId: `evt_${runId}_${seq}`, runId, sessionId: `sess_of_${runId}`, seq, sessionSeq: seq, ts: 1, type: 'delta', payload: {} }];
  const of = (runId: string) => listener.notified.filter((m) => m.payload.includes(` ${runId} `)).map((m) => m.payload);

  it('sends what waits together, the latest position of each run standing for the ones before it', async () => {
    const [a, b] = [`run_ann_${++n}`, `run_ann_${++n}`];
    // What one turn of the event loop announces goes out after it, as one statement.
    bus.publish(batch(a, 1));
    bus.publish(batch(a, 2));
    bus.publish(batch(b, 1));
    bus.publish(batch(a, 3));
    await expect.poll(() => of(a).length + of(b).length).toBe(2);
    expect(of(a)).toEqual([`sess_of_${a} ${a} 3 3 3 ${bus.origin}`]);
    expect(of(b)).toEqual([`sess_of_${b} ${b} 1 1 1 ${bus.origin}`]);
    // The next turn's go out on their own.
    bus.publish(batch(a, 4));
    await expect.poll(() => of(a)).toEqual([`sess_of_${a} ${a} 3 3 3 ${bus.origin}`, `sess_of_${a} ${a} 4 4 4 ${bus.origin}`]);
  });

  it('keeps what it could not send for its next connection', async () => {
    const runId = `run_ann_${++n}`;
    // The watching bus has closed: the one listener is this bus's.
    const [before] = await listenerPids();
    await orm.em.fork().execute('SELECT pg_terminate_backend(?)', [before]);
    bus.publish(batch(runId, 7));
    await expect.poll(() => of(runId), { timeout: 15_000 }).toEqual([`sess_of_${runId} ${runId} 7 7 7 ${bus.origin}`]);
    // Sent by the listener's next connection.
    const sender = listener.notified.find((m) => m.payload.includes(` ${runId} `))!.from;
    expect(sender).not.toBe(before);
    expect(await listenerPids()).toEqual([sender]);
  });
});
