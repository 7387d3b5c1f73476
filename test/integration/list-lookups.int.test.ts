// Statements that take a list of keys (a JSON array, one parameter) reach
// their rows through the key's index, however much history the table holds:
// a retention sweep's deletes of steps and events, the release of claims, and
// an async admission's jobs.
// Each runs in a transaction whose counters (pg_stat_xact_user_tables) say how
// it read the tables, read before and after it: a backend keeps counts of
// earlier transactions in that view until it flushes them, which a busy
// machine may put off. The clear of a ticket's ephemeral memory, which goes
// out inside the final move's prepared statement, keeps an index in the plan
// PostgreSQL prepares for any parameters.
import { beforeAll, expect, it } from 'vitest';
import type { EntityManager } from '@mikro-orm/postgresql';
import { nativePool, prepared } from '../../src/store/native.js';
import { memoryClear } from '../../src/store/memory.js';
import { addAdmittedJobs, admissionOwner, deleteExpiredTickets, insertSteps, insertTicket, releaseTicketLeases } from '../../src/store/ticket-store.js';
import { countedDatabase } from '../support/db.js';

const { em, orm } = countedDatabase();

type Reads = { seq: number; idx: number };
const READS = 'SELECT seq_scan::int AS seq, idx_scan::int AS idx FROM pg_stat_xact_user_tables WHERE relname = $1';

/** How `tx` has read `table` so far: sequential scans and index scans. */
const readsOf = async (tx: EntityManager, table: string) => (await tx.execute<Reads[]>(READS.replace('$1', '?'), [table]))[0]!;

/** The scans of `table` between two counts. */
const readsSince = (before: Reads, after: Reads): Reads => ({ seq: after.seq - before.seq, idx: after.idx - before.idx });

// A history of 4,000 tickets, each with two steps and ten events, analysed as autovacuum would.
beforeAll(async () => {
  await em().transactional(async (tx) => {
    await insertTicket(tx, {
      ticket: 'tkt_ll_seed', tenant_id: 'default', contract_id: 'c', contract_version: '1', request_id: 'req-ll', session_id: 'sess-ll', idempotency_key: 'tkt_ll_seed',
      request_hash: 'h', request: {}, mode: 'async', trace_id: 't', traceparent: null, expected_latency_ms: 1000, retention_ms: 60_000,
    });
    await insertSteps(tx, 'tkt_ll_seed', ['s1', 's2'].map((step_id, position) => ({ step_id, position, label: step_id, capability: 'tool.pure', side_effect: false })));
    const copy = (table: string) =>
      `INSERT INTO ${table} SELECT (jsonb_populate_record(t, jsonb_build_object('ticket', 'tkt_ll_' || g, 'idempotency_key', 'tkt_ll_' || g))).* FROM ${table} t, generate_series(1, 4000) g WHERE t.ticket = 'tkt_ll_seed'`;
    await tx.execute(copy('tickets'));
    await tx.execute(copy('ticket_steps'));
    await tx.execute("INSERT INTO ticket_events (ticket, seq, ts, type, payload) SELECT 'tkt_ll_' || g, s, 0, 'NOTE', '{}' FROM generate_series(1, 4000) g, generate_series(1, 10) s");
  });
  await em().execute('ANALYZE tickets, ticket_steps, ticket_events');
});

it("deletes the expired tickets' steps and events through the ticket's index", async () => {
  await em().execute("UPDATE tickets SET status = 'SUCCEEDED', expires_at = now() - interval '1 hour' WHERE ticket IN ('tkt_ll_1', 'tkt_ll_2')");
  await em().transactional(async (tx) => {
    const tables = ['ticket_steps', 'ticket_events'];
    const before = await Promise.all(tables.map((table) => readsOf(tx, table)));
    expect(await deleteExpiredTickets(tx, 10)).toBe(2);
    for (const [i, table] of tables.entries()) {
      const reads = readsSince(before[i]!, await readsOf(tx, table));
      expect(reads.seq, table).toBe(0);
      expect(reads.idx, table).toBeGreaterThan(0);
    }
  });
  const left = await em().execute<{ steps: number; events: number }[]>(
    "SELECT (SELECT count(*)::int FROM ticket_steps WHERE ticket IN ('tkt_ll_1', 'tkt_ll_2')) AS steps, (SELECT count(*)::int FROM ticket_events WHERE ticket IN ('tkt_ll_1', 'tkt_ll_2')) AS events",
  );
  expect(left).toEqual([{ steps: 0, events: 0 }]);
  const [kept] = await em().execute<{ n: number }[]>('SELECT count(*)::int AS n FROM ticket_events');
  expect(kept!.n).toBe(39_980);
});

it("releases claims through the ticket's index, only the given worker's", async () => {
  await em().execute("UPDATE tickets SET lease_owner = CASE WHEN ticket = 'tkt_ll_5' THEN 'worker-b' ELSE 'worker-a' END, lease_expires_at = now() + interval '1 minute' WHERE ticket IN ('tkt_ll_3', 'tkt_ll_4', 'tkt_ll_5')");
  await em().transactional(async (tx) => {
    const before = await readsOf(tx, 'tickets');
    await releaseTicketLeases(tx, ['tkt_ll_3', 'tkt_ll_4', 'tkt_ll_5'], 'worker-a');
    const reads = readsSince(before, await readsOf(tx, 'tickets'));
    expect(reads.seq).toBe(0);
    expect(reads.idx).toBeGreaterThan(0);
  });
  const leases = await em().execute("SELECT ticket, lease_owner FROM tickets WHERE ticket IN ('tkt_ll_3', 'tkt_ll_4', 'tkt_ll_5') ORDER BY ticket");
  expect(leases).toEqual([
    { ticket: 'tkt_ll_3', lease_owner: null },
    { ticket: 'tkt_ll_4', lease_owner: null },
    { ticket: 'tkt_ll_5', lease_owner: 'worker-b' },
  ]);
});

it("adds the admitted tickets' jobs through the ticket's index, only for those its admission still claims", async () => {
  await em().execute(
    "UPDATE tickets SET lease_owner = CASE WHEN ticket = 'tkt_ll_8' THEN 'worker-a' ELSE 'admitted-' || ticket END, lease_expires_at = now() + interval '1 minute' WHERE ticket IN ('tkt_ll_6', 'tkt_ll_7', 'tkt_ll_8')",
  );
  expect(admissionOwner('tkt_ll_6')).toBe('admitted-tkt_ll_6');
  // One connection, in a transaction rolled back at the end: what it creates stays its own.
  const client = await (await nativePool(orm())).connect();
  try {
    await client.query('BEGIN');
    // The jobs, as one call over the claimed tickets' ids: here a row that names each.
    await client.query('CREATE TEMP TABLE jobs_added (ticket text) ON COMMIT DROP');
    await client.query('CREATE FUNCTION pg_temp.add_jobs(ids text[]) RETURNS SETOF int LANGUAGE sql AS $$ INSERT INTO jobs_added SELECT unnest(ids) RETURNING 1 $$');
    const ticketReads = async () => (await client.query<Reads>(READS, ['tickets'])).rows[0]!;
    const before = await ticketReads();
    await addAdmittedJobs(client, ['tkt_ll_6', 'tkt_ll_7', 'tkt_ll_8'], (ids) => ({ sql: `pg_temp.add_jobs(${ids})`, params: [] }));
    const reads = readsSince(before, await ticketReads());
    expect(reads.seq).toBe(0);
    expect(reads.idx).toBeGreaterThan(0);
    const added = await client.query<{ ticket: string }>('SELECT ticket FROM jobs_added ORDER BY ticket');
    expect(added.rows.map((r) => r.ticket)).toEqual(['tkt_ll_6', 'tkt_ll_7']);
    const leases = await client.query("SELECT ticket, lease_owner FROM tickets WHERE ticket IN ('tkt_ll_6', 'tkt_ll_7', 'tkt_ll_8') ORDER BY ticket");
    expect(leases.rows).toEqual([
      { ticket: 'tkt_ll_6', lease_owner: null },
      { ticket: 'tkt_ll_7', lease_owner: null },
      { ticket: 'tkt_ll_8', lease_owner: 'worker-a' },
    ]);
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
});

it("clears a ticket's ephemeral memory through the scope's index, in a plan prepared for any parameters", async () => {
  // 3,000 entries: GLOBAL and SESSION ones, and the ephemeral entries of three tickets.
  await em().execute(
    `INSERT INTO memory (memory_id, tenant_id, scope, scope_id, key, value, tags)
     SELECT 'mem_ll_' || g, 'default', CASE WHEN g <= 30 THEN 'EPHEMERAL' WHEN g % 2 = 0 THEN 'SESSION' ELSE 'GLOBAL' END,
            CASE WHEN g <= 30 THEN 'tkt_ll_' || (g % 3) ELSE 'sess-ll-' || (g % 50) END, 'k' || g, '{}', '[]'
     FROM generate_series(1, 3000) g`,
  );
  await em().execute('ANALYZE memory');
  const clear = memoryClear('default', 'EPHEMERAL', ['tkt_ll_0', 'tkt_ll_1']);
  const { text } = prepared(clear.sql);
  const [plan] = await em().execute<{ 'QUERY PLAN': unknown }[]>(`EXPLAIN (GENERIC_PLAN, FORMAT JSON) ${text}`);
  const nodes = JSON.stringify(plan!['QUERY PLAN']);
  expect(nodes).not.toContain('"Seq Scan"');
  expect(nodes).toContain('"Relation Name":"memory"');
  await em().execute(clear.sql, clear.params);
  const left = await em().execute<{ scope: string; n: number }[]>("SELECT scope, count(*)::int AS n FROM memory WHERE memory_id LIKE 'mem_ll_%' GROUP BY scope ORDER BY scope");
  expect(left).toEqual([
    { scope: 'EPHEMERAL', n: 10 },
    { scope: 'GLOBAL', n: 1485 },
    { scope: 'SESSION', n: 1485 },
  ]);
});
