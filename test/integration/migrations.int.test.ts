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

  it('carry data written before tenants into the default tenant, and platform tools, contracts, assemblies and policies into the catalogue', async () => {
    const upgrade = await createTestDatabase();
    const old = await createOrm({ url: upgrade.url, poolMax: 2 });
    const client = new pg.Client({ connectionString: upgrade.url });
    await client.connect();
    try {
      await old.migrator.up({ to: 'Migration20261123120000_tickets_and_contract_versions' });
      await client.query("INSERT INTO sessions (session_id, user_id) VALUES ('s1', 'alice')");
      await client.query("INSERT INTO runs (run_id, session_id, root_agent_id, status, trace_id) VALUES ('r1', 's1', 'a1', 'RUNNING', 't')");
      await client.query("INSERT INTO tool_calls (tool_call_id, run_id, tool_name, kind, status) VALUES ('tc1', 'r1', 'pay', 'http', 'WAITING_APPROVAL')");
      await client.query("INSERT INTO approvals (approval_id, run_id, tool_call_id, expires_at, session_id) VALUES ('ap1', 'r1', 'tc1', now() + interval '1 hour', 's1')");
      await client.query("INSERT INTO agents (agent_id, name, endpoint) VALUES ('a1', 'A', 'http://127.0.0.1:9')");
      await client.query("INSERT INTO tools (tool_name, kind, endpoint) VALUES ('pay', 'http', 'http://127.0.0.1:9')");
      await client.query("INSERT INTO context_blobs (context_key, owner_type, owner_id, data) VALUES ('k1', 'session', 's1', '{}')");
      await client.query("INSERT INTO context_blob_versions (context_key, version, data) VALUES ('k1', 1, '{}')");
      await client.query("INSERT INTO api_keys (key_id, name, key_hash, prefix) VALUES ('key1', 'old', 'h', 'abc_')");
      await client.query("INSERT INTO assemblies (assembly_id, version, intent, definition) VALUES ('asm', '1.0.0', 'do_it', '{}')");
      await client.query("INSERT INTO contract_versions (contract_id, version, intent, definition) VALUES ('c:x', '1.0.0', 'do_it', '{}')");
      await client.query("INSERT INTO policies (policy_id, version, document, active) VALUES ('pol1', 4, '{}', true)");

      expect((await migrate(old)).length).toBeGreaterThan(0);
      const one = async (sql: string) => (await client.query(sql)).rows[0];
      expect(await one('SELECT tenant_id FROM sessions')).toEqual({ tenant_id: 'default' });
      expect(await one('SELECT tenant_id, tokens_used FROM runs')).toEqual({ tenant_id: 'default', tokens_used: 0 });
      expect(await one('SELECT tenant_id FROM approvals')).toEqual({ tenant_id: 'default' });
      expect(await one('SELECT tenant_id FROM agents')).toEqual({ tenant_id: 'default' });
      expect(await one('SELECT tenant_id FROM tools')).toEqual({ tenant_id: '*' });
      expect(await one('SELECT tenant_id FROM context_blob_versions')).toEqual({ tenant_id: 'default' });
      expect(await one('SELECT tenant_id, scopes, user_ids FROM api_keys')).toEqual({ tenant_id: 'default', scopes: ['admin'], user_ids: null });
      expect(await one("SELECT count(*)::int AS n FROM tenants WHERE tenant_id = 'default'")).toEqual({ n: 1 });
      // What was registered before tenants stays the platform's, seen by every tenant.
      for (const table of ['assemblies', 'contract_versions', 'policies']) expect(await one(`SELECT tenant_id FROM ${table}`)).toEqual({ tenant_id: '*' });
      expect(await pendingMigrations(old)).toEqual([]);
    } finally {
      await client.end();
      await old.close();
      await upgrade.drop();
    }
  });
});
