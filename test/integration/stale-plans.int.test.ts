// A statement prepared on the ORM's pool (store/native.ts) outlives a
// migration that adds a column to a table it reads or returns with `*`: every
// connection that had prepared it refused it from then on, with SQLSTATE
// 0A000, "cached plan must not change result type". Another core's migration
// (a rolling upgrade) or `abc migrate` does that while a core serves. Each
// case first prepares its statement on all of the pool's connections (poolMax
// 4, twelve calls at once), then adds the column from another connection.
import pg from 'pg';
import { expect, it } from 'vitest';
import { executeOne } from '../../src/store/native.js';
import { getSteps, insertSteps, insertTicket, transitionTicket } from '../../src/store/ticket-store.js';
import { countedDatabase } from '../support/db.js';

const { em, orm } = countedDatabase();

/** Twelve calls of `call` at once, one per index: more than the pool's connections, so each of them runs some. */
const onEveryConnection = <T>(call: (i: number) => Promise<T>) => Promise.all(Array.from({ length: 12 }, (_, i) => call(i)));

/** DDL from a connection of its own, as another core's migration is. */
async function migrateElsewhere(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: orm().config.get('clientUrl') });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

it('runs a prepared `SELECT *` and `RETURNING *` again after a column is added, with the column', async () => {
  await em().execute("CREATE TABLE probe (id int PRIMARY KEY, a text); INSERT INTO probe SELECT g, 'x' FROM generate_series(0, 11) g");
  const read = (i: number) => executeOne<Record<string, unknown>>(em(), 'SELECT * FROM probe WHERE id = ?', [i]);
  const write = (i: number) => executeOne<Record<string, unknown>>(em(), "UPDATE probe SET a = a || 'y' WHERE id = ? RETURNING *", [i]);
  await onEveryConnection(read);
  await onEveryConnection(write);

  await migrateElsewhere("ALTER TABLE probe ADD COLUMN b text NOT NULL DEFAULT 'added'");

  expect((await onEveryConnection(read)).map(([row]) => row)).toEqual(Array.from({ length: 12 }, (_, id) => ({ id, a: 'xy', b: 'added' })));
  expect((await onEveryConnection(write)).map(([row]) => row)).toEqual(Array.from({ length: 12 }, (_, id) => ({ id, a: 'xyy', b: 'added' })));
  // Once renamed, the statement stays prepared under its new name.
  expect((await onEveryConnection(read)).every(([row]) => row!.b === 'added')).toBe(true);
});

it("moves tickets and reads their steps after another core's migration added a column to both tables", async () => {
  const tickets = Array.from({ length: 12 }, (_, i) => `tkt_stale_${i}`);
  await em().transactional(async (tx) => {
    for (const ticket of tickets) {
      await insertTicket(tx, {
        ticket, tenant_id: 'default', contract_id: 'c', contract_version: '1', request_id: `req-${ticket}`, session_id: `sess-${ticket}`, idempotency_key: ticket,
        request_hash: 'h', request: {}, mode: 'async', trace_id: 't', traceparent: null, expected_latency_ms: 1000, retention_ms: 60_000,
      });
      await insertSteps(tx, ticket, [{ step_id: 's1', position: 0, label: 's1', capability: 'tool.pure', side_effect: false }]);
    }
  });
  // A move on its own (no transaction) and a steps read are prepared statements returning whole rows.
  await onEveryConnection((i) => transitionTicket(em(), tickets[i]!, 'start', {}, 'worker'));
  await onEveryConnection((i) => getSteps(em(), tickets[i]!));

  await migrateElsewhere("ALTER TABLE tickets ADD COLUMN probe text DEFAULT 'new'; ALTER TABLE ticket_steps ADD COLUMN probe text DEFAULT 'new'");

  const moved = await onEveryConnection((i) => transitionTicket(em(), tickets[i]!, 'context_built'));
  expect(moved.map((t) => [t.lifecycle_state, (t as unknown as { probe: string }).probe])).toEqual(tickets.map(() => ['PLAN_GENERATION', 'new']));
  const steps = await onEveryConnection((i) => getSteps(em(), tickets[i]!));
  expect(steps.map(([s]) => [s!.status, (s as unknown as { probe: string }).probe])).toEqual(tickets.map(() => ['PENDING', 'new']));
});
