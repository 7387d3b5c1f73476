// A ticket's lifecycle moves: with their events, NOTIFY and other records in
// the move's one statement; several hops in one write, each checked by the
// table and each recorded; and the locking read when the state is not the
// one expected.
import { expect, it } from 'vitest';
import { EventBus } from '../../src/store/event-bus.js';
import { waitUntil } from '../../src/store/wake-watch.js';
import { memoryClear, memoryRow, storeMemoryRows } from '../../src/store/memory.js';
import { snapshotsInsert } from '../../src/store/snapshot-store.js';
import { createTicket, insertTicket, transitionTicket, transitionTicketFrom } from '../../src/store/ticket-store.js';
import { countedDatabase } from '../support/db.js';
import { testLogger } from '../support/log.js';

const { em, counted } = countedDatabase();

/** A ticket in `state`. */
async function seed(ticket: string, state: string) {
  await em().transactional((tx) =>
    insertTicket(tx, {
      ticket, tenant_id: 'default', contract_id: 'c', contract_version: '1', request_id: `req-${ticket}`, session_id: 'sess-moves', idempotency_key: ticket,
      request_hash: 'h', request: {}, mode: 'async', trace_id: 't', traceparent: null, expected_latency_ms: 1000, retention_ms: 60_000,
    }),
  );
  await em().execute('UPDATE tickets SET lifecycle_state = ? WHERE ticket = ?', [state, ticket]);
}

const events = (ticket: string) => em().execute<{ seq: number; type: string; payload: Record<string, unknown> }[]>('SELECT seq, type, payload FROM ticket_events WHERE ticket = ? ORDER BY seq', [ticket]);
const stateOf = async (ticket: string) => (await em().execute<{ lifecycle_state: string; status: string; phase: string; event_seq: number }[]>('SELECT lifecycle_state, status, phase, event_seq FROM tickets WHERE ticket = ?', [ticket]))[0];

it('moves through several states in one statement, each hop checked by the table and recorded, with the records it carries', async () => {
  await seed('tkt_mv_through', 'STEP_EXECUTION');
  // Another tenant's row under the same scope id is not this move's to clear.
  await storeMemoryRows(em(), [memoryRow('default', 'step_context', {}, 'EPHEMERAL', 'tkt_mv_through:a'), memoryRow('tenant_mv_other', 'step_context', {}, 'EPHEMERAL', 'tkt_mv_through:a')]);
  const calls: string[] = [];
  const moved = await transitionTicket(counted(calls), 'tkt_mv_through', 'review_passed', { engine: { reviewed: true } }, 'engine', {
    from: 'STEP_EXECUTION',
    through: [{ trigger: 'steps_settled', trace: [{ type: 'BATCH', payload: {} }] }],
    trace: [{ type: 'REVIEW', payload: {} }],
    also: [memoryClear('default', 'EPHEMERAL', ['tkt_mv_through:a']), snapshotsInsert([{ snapshotId: 'snap_mv_through', ticket: 'tkt_mv_through', state: 'STEP_REVIEW', content: { label: 'batch' } }])],
  });
  expect(calls).toHaveLength(1);
  expect(moved).toMatchObject({ lifecycle_state: 'STEP_EXECUTION', status: 'RUNNING', phase: 'execute', engine: { reviewed: true }, event_seq: 4 });
  expect(await events('tkt_mv_through')).toEqual([
    { seq: 1, type: 'BATCH', payload: {} },
    { seq: 2, type: 'STATE_TRANSITION', payload: { from: 'STEP_EXECUTION', to: 'STEP_REVIEW', trigger: 'steps_settled', actor: 'engine', phase: 'execute', status: 'RUNNING' } },
    { seq: 3, type: 'REVIEW', payload: {} },
    { seq: 4, type: 'STATE_TRANSITION', payload: { from: 'STEP_REVIEW', to: 'STEP_EXECUTION', trigger: 'review_passed', actor: 'engine', phase: 'execute', status: 'RUNNING' } },
  ]);
  expect(await em().execute("SELECT tenant_id FROM memory WHERE scope_id = 'tkt_mv_through:a'")).toEqual([{ tenant_id: 'tenant_mv_other' }]);
  expect(await em().execute("SELECT lifecycle_state FROM snapshots WHERE snapshot_id = 'snap_mv_through'")).toEqual([{ lifecycle_state: 'STEP_REVIEW' }]);
});

it('writes none of the records of a move whose row moved on before it (a cancel won the race)', async () => {
  await seed('tkt_mv_raced', 'CANCELED');
  const calls: string[] = [];
  // The caller expects CONTEXT_BUILD; the row is already CANCELED.
  await expect(
    transitionTicket(counted(calls), 'tkt_mv_raced', 'context_built', {}, 'engine', { from: 'CONTEXT_BUILD', also: [snapshotsInsert([{ snapshotId: 'snap_mv_raced', ticket: 'tkt_mv_raced', state: 'PLAN_GENERATION', content: {} }])] }),
  ).rejects.toMatchObject({ payload: { code: 'illegal_transition', details: { from: 'CANCELED', trigger: 'context_built' } } });
  expect(await em().execute("SELECT 1 FROM snapshots WHERE snapshot_id = 'snap_mv_raced'")).toEqual([]);
  expect(await events('tkt_mv_raced')).toEqual([]);
});

it('refuses a path with a hop the table does not allow, and writes nothing', async () => {
  await seed('tkt_mv_refused', 'GLOBAL_REVIEW');
  await expect(
    transitionTicket(em(), 'tkt_mv_refused', 'review_passed', {}, 'engine', { from: 'GLOBAL_REVIEW', through: [{ trigger: 'steps_settled' }], also: [snapshotsInsert([{ snapshotId: 'snap_mv_refused', ticket: 'tkt_mv_refused', state: 'STEP_REVIEW', content: {} }])] }),
  ).rejects.toMatchObject({ payload: { code: 'illegal_transition', details: { machine: 'contract_lifecycle', from: 'GLOBAL_REVIEW', trigger: 'steps_settled' } } });
  expect(await stateOf('tkt_mv_refused')).toMatchObject({ lifecycle_state: 'GLOBAL_REVIEW', event_seq: 0 });
  expect(await events('tkt_mv_refused')).toEqual([]);
  expect(await em().execute("SELECT 1 FROM snapshots WHERE snapshot_id = 'snap_mv_refused'")).toEqual([]);
});

it('moves from the state the row is in when the caller expected another, after a locking read', async () => {
  await seed('tkt_mv_guess', 'GLOBAL_REVIEW');
  const calls: string[] = [];
  // Outside a transaction: the read and the write take one of their own.
  const moved = await transitionTicket(counted(calls), 'tkt_mv_guess', 'review_passed', {}, 'engine', { from: 'STEP_REVIEW' });
  expect(calls).toHaveLength(1);
  expect(moved).toMatchObject({ lifecycle_state: 'PACKAGING', phase: 'package', event_seq: 1 });
  expect((await events('tkt_mv_guess')).map((e) => e.payload)).toEqual([{ from: 'GLOBAL_REVIEW', to: 'PACKAGING', trigger: 'review_passed', actor: 'engine', phase: 'package', status: 'RUNNING' }]);
});

it('moves only from the state named, in one statement, with a claim; a ticket in another state is left alone', async () => {
  await seed('tkt_mv_fresh', 'INIT');
  await seed('tkt_mv_running', 'STEP_EXECUTION');
  const calls: string[] = [];
  const started = await transitionTicketFrom(counted(calls), 'tkt_mv_fresh', 'INIT', 'start', { lease: { owner: 'worker-1', ms: 60_000 } }, 'worker');
  expect(calls).toHaveLength(1);
  expect(started).toMatchObject({ lifecycle_state: 'CONTEXT_BUILD', status: 'RUNNING', lease_owner: 'worker-1', event_seq: 1 });
  expect((await em().execute<{ started: boolean }[]>("SELECT started_at IS NOT NULL AS started FROM tickets WHERE ticket = 'tkt_mv_fresh'"))[0]!.started).toBe(true);
  expect(await transitionTicketFrom(counted(calls), 'tkt_mv_running', 'INIT', 'start', { lease: { owner: 'worker-1', ms: 60_000 } }, 'worker')).toBeUndefined();
  expect(calls).toHaveLength(2);
  expect(await stateOf('tkt_mv_running')).toMatchObject({ lifecycle_state: 'STEP_EXECUTION', event_seq: 0 });
  expect((await em().execute<{ lease_owner: string | null }[]>("SELECT lease_owner FROM tickets WHERE ticket = 'tkt_mv_running'"))[0]!.lease_owner).toBeNull();
});

it('creates a ticket claimed by its admission with its first event in one statement, and writes nothing under a taken key', async () => {
  const ticket = (id: string) => ({
    ticket: id, tenant_id: 'default', contract_id: 'c', contract_version: '1', request_id: `req-${id}`, session_id: 'sess-moves', idempotency_key: 'taken-once',
    request_hash: 'h', request: { a: 1 }, mode: 'sync', trace_id: 't', traceparent: null, expected_latency_ms: 1000, retention_ms: 60_000,
  });
  const calls: string[] = [];
  const claim = { owner: 'admitted-tkt_mv_new', ms: 60_000 };
  const created = await insertTicket(counted(calls), ticket('tkt_mv_new'), { claim, event: { type: 'ticket_created', payload: { request_id: 'req-tkt_mv_new' } } });
  expect(calls).toHaveLength(1);
  expect(created).toMatchObject({ ticket: 'tkt_mv_new', lifecycle_state: 'INIT', status: 'QUEUED', event_seq: 1, request: { a: 1 }, lease_owner: 'admitted-tkt_mv_new', started_at: null });
  expect(await events('tkt_mv_new')).toEqual([{ seq: 1, type: 'ticket_created', payload: { request_id: 'req-tkt_mv_new' } }]);
  expect(await insertTicket(em(), ticket('tkt_mv_again'), { claim, event: { type: 'ticket_created', payload: {} } })).toBeUndefined();
  expect(await events('tkt_mv_again')).toEqual([]);
});

it('creates a ticket started and claimed by the worker that runs it at once, its start moved by the table and recorded, in one statement', async () => {
  const calls: string[] = [];
  const created = await insertTicket(
    counted(calls),
    {
      ticket: 'tkt_mv_started', tenant_id: 'default', contract_id: 'c', contract_version: '1', request_id: 'req-started', session_id: 'sess-moves', idempotency_key: 'started-once',
      request_hash: 'h', request: {}, mode: 'sync', trace_id: 't', traceparent: null, expected_latency_ms: 1000, retention_ms: 60_000,
    },
    { event: { type: 'ticket_created', payload: { request_id: 'req-started' } }, start: { owner: 'now-tkt_mv_started', ms: 60_000 } },
  );
  expect(calls).toHaveLength(1);
  expect(created).toMatchObject({ lifecycle_state: 'CONTEXT_BUILD', status: 'RUNNING', phase: 'resolve_context', lease_owner: 'now-tkt_mv_started', event_seq: 2 });
  const [claim] = await em().execute<{ started: boolean; leased: boolean }[]>("SELECT started_at IS NOT NULL AS started, lease_expires_at > now() + interval '30 seconds' AS leased FROM tickets WHERE ticket = 'tkt_mv_started'");
  expect(claim).toEqual({ started: true, leased: true });
  expect(await events('tkt_mv_started')).toEqual([
    { seq: 1, type: 'ticket_created', payload: { request_id: 'req-started' } },
    { seq: 2, type: 'STATE_TRANSITION', payload: { from: 'INIT', to: 'CONTEXT_BUILD', trigger: 'start', actor: 'worker', phase: 'resolve_context', status: 'RUNNING' } },
  ]);
});

it('creates a ticket moved through several hops, each checked by the table and recorded, with the records it carries, in one statement; under a taken key it writes none of them', async () => {
  const fresh = (id: string) => ({
    ticket: id, tenant_id: 'default', contract_id: 'c', contract_version: '1', request_id: `req-${id}`, session_id: 'sess-moves', idempotency_key: 'created-through',
    request_hash: 'h', request: { b: 2 }, mode: 'sync', trace_id: 't', traceparent: null, expected_latency_ms: 1000, retention_ms: 60_000,
  });
  const create = (id: string, em_ = em()) =>
    createTicket(em_, fresh(id), { owner: `now-${id}`, ms: 60_000 }, 'plan_generated', { assembly_id: 'asm', assembly_version: '2', engine: { planned: true } }, 'engine', {
      through: [
        { trigger: 'start', trace: [{ type: 'ticket_created', payload: { request_id: `req-${id}` } }], actor: 'worker' },
        { trigger: 'context_built', trace: [{ type: 'AGENT_DECISION', payload: { role: 'CONTEXT_BUILDER' } }] },
      ],
      trace: [{ type: 'AGENT_DECISION', payload: { role: 'PLANNER' } }],
      also: [snapshotsInsert([{ snapshotId: `snap_${id}`, ticket: id, state: 'PLAN_CHECK', content: { label: 'plan' } }])],
    });
  const calls: string[] = [];
  const created = await create('tkt_mv_through_new', counted(calls));
  expect(calls).toHaveLength(1);
  expect(created).toMatchObject({ lifecycle_state: 'PLAN_CHECK', status: 'RUNNING', phase: 'plan', assembly_id: 'asm', assembly_version: '2', engine: { planned: true }, lease_owner: 'now-tkt_mv_through_new', event_seq: 6, request: { b: 2 } });
  expect((await em().execute("SELECT started_at IS NOT NULL AS started FROM tickets WHERE ticket = 'tkt_mv_through_new'"))[0]).toEqual({ started: true });
  expect(await events('tkt_mv_through_new')).toEqual([
    { seq: 1, type: 'ticket_created', payload: { request_id: 'req-tkt_mv_through_new' } },
    { seq: 2, type: 'STATE_TRANSITION', payload: { from: 'INIT', to: 'CONTEXT_BUILD', trigger: 'start', actor: 'worker', phase: 'resolve_context', status: 'RUNNING' } },
    { seq: 3, type: 'AGENT_DECISION', payload: { role: 'CONTEXT_BUILDER' } },
    { seq: 4, type: 'STATE_TRANSITION', payload: { from: 'CONTEXT_BUILD', to: 'PLAN_GENERATION', trigger: 'context_built', actor: 'engine', phase: 'plan', status: 'RUNNING' } },
    { seq: 5, type: 'AGENT_DECISION', payload: { role: 'PLANNER' } },
    { seq: 6, type: 'STATE_TRANSITION', payload: { from: 'PLAN_GENERATION', to: 'PLAN_CHECK', trigger: 'plan_generated', actor: 'engine', phase: 'plan', status: 'RUNNING' } },
  ]);
  expect(await em().execute("SELECT snapshot_id FROM snapshots WHERE ticket = 'tkt_mv_through_new'")).toEqual([{ snapshot_id: 'snap_tkt_mv_through_new' }]);

  // The key is taken: neither the ticket, nor its events, nor its snapshot.
  expect(await create('tkt_mv_through_again')).toBeUndefined();
  expect(await events('tkt_mv_through_again')).toEqual([]);
  expect(await em().execute("SELECT snapshot_id FROM snapshots WHERE ticket = 'tkt_mv_through_again'")).toEqual([]);

  // A path the table does not allow is refused before anything is sent.
  await expect(createTicket(em(), { ...fresh('tkt_mv_through_bad'), idempotency_key: 'bad' }, { owner: 'now', ms: 1000 }, 'prepared', {}, 'engine')).rejects.toMatchObject({ payload: { code: 'illegal_transition' } });
});

it('wakes the waiters of a ticket at each move, and those of its end only at the terminal one', async () => {
  await seed('tkt_mv_ended', 'GLOBAL_REVIEW');
  const bus = await EventBus.start(em().config.get('clientUrl')!, testLogger());
  const wakes: string[] = [];
  const off = [bus.onWake('ticket:tkt_mv_ended', () => wakes.push('moved')), bus.onWake('ticket-ended:tkt_mv_ended', () => wakes.push('ended'))];
  try {
    await transitionTicket(em(), 'tkt_mv_ended', 'review_passed', {}, 'engine', { from: 'GLOBAL_REVIEW' });
    await expect.poll(() => wakes).toEqual(['moved']);
    await transitionTicket(em(), 'tkt_mv_ended', 'packaged', {}, 'engine', { from: 'PACKAGING' });
    await expect.poll(() => wakes).toEqual(['moved', 'moved', 'ended']);
  } finally {
    off.forEach((f) => f());
    await bus.close();
  }
});

it('announces a move on its own after its commit, and its end with it, its statement notifying no one', async () => {
  await seed('tkt_mv_announced', 'GLOBAL_REVIEW');
  const bus = await EventBus.start(em().config.get('clientUrl')!, testLogger());
  const wakes: string[] = [];
  const off = [bus.onWake('ticket:tkt_mv_announced', () => wakes.push('moved')), bus.onWake('ticket-ended:tkt_mv_announced', () => wakes.push('ended'))];
  const announced: [string, boolean | undefined][] = [];
  const announce = (ticket: string, ended?: boolean) => {
    announced.push([ticket, ended]);
    bus.announceTicket(ticket, ended);
  };
  try {
    const calls: string[] = [];
    await transitionTicket(counted(calls), 'tkt_mv_announced', 'review_passed', {}, 'engine', { from: 'GLOBAL_REVIEW', announce });
    await transitionTicket(counted(calls), 'tkt_mv_announced', 'packaged', {}, 'engine', { from: 'PACKAGING', announce });
    expect(calls).toHaveLength(2);
    for (const sql of calls) expect(sql).not.toContain('pg_notify');
    expect(announced).toEqual([['tkt_mv_announced', false], ['tkt_mv_announced', true]]);
    await expect.poll(() => wakes).toEqual(['moved', 'moved', 'ended']);
  } finally {
    off.forEach((f) => f());
    await bus.close();
  }
});

it('calls functions with the written row in the move\'s one statement, and returns the row without their values', async () => {
  await seed('tkt_mv_calls', 'PACKAGING');
  await em().execute('CREATE TABLE test_calls (ticket text, state text); CREATE FUNCTION test_call(t text, s text) RETURNS int LANGUAGE sql AS $$ INSERT INTO test_calls VALUES (t, s) RETURNING 1 $$');
  const calls: string[] = [];
  const moved = await transitionTicket(counted(calls), 'tkt_mv_calls', 'packaged', {}, 'engine', { from: 'PACKAGING', calls: [{ sql: 'test_call(moved.ticket, ?::text)', params: ['done'] }] });
  expect(calls).toHaveLength(1);
  expect(moved).toMatchObject({ ticket: 'tkt_mv_calls', lifecycle_state: 'COMPLETED' });
  expect(Object.keys(moved).filter((k) => k.startsWith('called') || k === 'notified')).toEqual([]);
  expect(await em().execute('SELECT ticket, state FROM test_calls')).toEqual([{ ticket: 'tkt_mv_calls', state: 'done' }]);
});

it('reads again each recheckMs a change that comes without its notification', async () => {
  const bus = await EventBus.start(em().config.get('clientUrl')!, testLogger());
  try {
    let state = 'RUNNING';
    setTimeout(() => (state = 'COMPLETED'), 100);
    let reads = 0;
    const read = async () => (reads++, state);
    // Nothing notifies ticket-ended here, as when a core of an earlier version ends the ticket.
    expect(await waitUntil(bus, 'ticket-ended:tkt_mv_silent', read, (s) => s === 'COMPLETED', Date.now() + 30_000, undefined, 50)).toBe('COMPLETED');
    expect(reads).toBeGreaterThan(1);
  } finally {
    await bus.close();
  }
});
