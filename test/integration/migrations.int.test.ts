import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { createOrm, migrate, pendingMigrations, type Orm } from '../../src/store/orm.js';
import { migrations } from '../../src/store/migrations/index.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';

describe('migrations', () => {
  let db: TestDatabase;
  let orm: Orm;

  beforeAll(async () => {
    db = await createTestDatabase();
    orm = await createOrm({ url: db.url, poolMax: 2 });
  });
  afterAll(async () => {
    await orm.close();
    await db.drop();
  });

  it('apply every committed migration to an empty database', async () => {
    expect(await pendingMigrations(orm)).toEqual(migrations.map((m) => m.name));
    expect(await migrate(orm)).toEqual(migrations.map((m) => m.name));
    expect(await pendingMigrations(orm)).toEqual([]);
  });

  it('are a no-op the second time', async () => {
    expect(await migrate(orm)).toEqual([]);
  });

  it('match the entities exactly, so no schema change is left uncommitted', async () => {
    const diff = await orm.schema.getUpdateSchemaSQL({ wrap: false });
    expect(diff.trim()).toBe('');
  });

  it('create the whole schema of seed 001 §12.2 and the platform tables', async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const tables = await client.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
      );
      expect(tables.rows.map((r) => r.table_name)).toEqual(
        expect.arrayContaining([
          'sessions', 'messages', 'runs', 'events', 'agents', 'tools', 'tool_calls', 'approvals', 'context_blobs',
          'tickets', 'frozen_plans', 'assemblies', 'execution_contracts', 'execution_transitions',
          'snapshots', 'memory', 'policies', 'idempotency_keys', 'api_keys',
        ]),
      );
      const id = await client.query(
        "SELECT data_type, column_default FROM information_schema.columns WHERE table_name = 'events' AND column_name = 'id'",
      );
      expect(id.rows[0]).toMatchObject({ data_type: 'bigint', column_default: expect.stringContaining('nextval') });

      // seq is unique per run: a second event with the same (run_id, seq) is refused.
      await client.query("INSERT INTO sessions (session_id, user_id, tenant_id) VALUES ('s1', 'u1', 'default')");
      await client.query("INSERT INTO runs (run_id, session_id, root_agent_id, status, trace_id, tenant_id) VALUES ('r1', 's1', 'a1', 'CREATED', 't', 'default')");
      const insert = (eventId: string, seq: number) =>
        client.query("INSERT INTO events (event_id, run_id, session_id, seq, ts, type) VALUES ($1, 'r1', 's1', $2, 0, 'user_input')", [eventId, seq]);
      await insert('e1', 1);
      await expect(insert('e2', 1)).rejects.toThrow(/uq_events_run_seq/);
      await insert('e3', 2);
      const ids = await client.query<{ id: string }>('SELECT id FROM events ORDER BY id');
      expect(ids.rows).toHaveLength(2);
    } finally {
      await client.end();
    }
  });
});
