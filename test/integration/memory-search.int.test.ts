// The context builder's memory hints: an intent's newest success cases, with
// thousands of cases the final moves dropped and no vacuum since, and its
// recent failures per capability; and the hints a sync submission reads ahead.
import type { EntityManager } from '@mikro-orm/postgresql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAILURE_MEMORY_MS, intentHintsRead, Memory } from '../../src/store/memory.js';
import { nativePool, prepared } from '../../src/store/native.js';
import { createOrm } from '../../src/store/orm.js';
import { createTestDatabase, migratedOrm } from '../support/db.js';

describe('memory hints of an intent', () => {
  let store: Awaited<ReturnType<typeof migratedOrm>>;
  let em: EntityManager;
  beforeAll(async () => {
    store = await migratedOrm();
    em = store.orm.em.fork();
    // As under load: many SESSION facts, and a tenant's 20 newest success
    // cases kept of 4,000 (the rest dropped, dead until a vacuum); statistics taken.
    await em.execute(`INSERT INTO memory (memory_id, tenant_id, scope, scope_id, key, value, tags)
      SELECT 'fact_' || g, 't1', 'SESSION', 's' || (g % 500), 'execution_fact:' || g, jsonb_build_object('type', 'execution_fact', 'n', g), '[]'
      FROM generate_series(1, 30000) g`);
    await em.execute(`INSERT INTO memory (memory_id, tenant_id, scope, scope_id, key, value, tags, created_at)
      SELECT 'case_' || g, 't1', 'GLOBAL', 'global', 'success:analyze_portfolio:tkt_' || lpad(g::text, 5, '0'),
             jsonb_build_object('type', 'success', 'intent', 'analyze_portfolio', 'n', g), '["success"]', now() - (4000 - g) * interval '1 second'
      FROM generate_series(1, 4000) g`);
    await em.execute("DELETE FROM memory WHERE key LIKE 'success:%' AND memory_id NOT IN (SELECT memory_id FROM memory WHERE key LIKE 'success:%' ORDER BY created_at DESC LIMIT 20)");
    // Newer entries whose words match the intent's, but which are no case of it.
    await em.execute(`INSERT INTO memory (memory_id, tenant_id, scope, scope_id, key, value, tags) VALUES
      ('note_1', 't1', 'GLOBAL', 'global', 'note:analyze_portfolio', '{"text": "success analyze_portfolio"}', '[]'),
      ('case_v2', 't1', 'GLOBAL', 'global', 'success:analyze_portfolio_v2:tkt_1', '{"type": "success", "intent": "analyze_portfolio_v2"}', '[]'),
      ('case_other', 't2', 'GLOBAL', 'global', 'success:analyze_portfolio:tkt_1', '{"type": "success", "intent": "analyze_portfolio"}', '[]')`);
    await em.execute('ANALYZE memory');
  });
  afterAll(async () => {
    await store?.close();
  });

  it("answers the intent's newest success cases of the tenant, and no other entry", async () => {
    const hints = await new Memory(() => em).intentHints('t1', 'analyze_portfolio');
    expect(hints.similar_successes).toEqual([4000, 3999, 3998, 3997, 3996].map((n) => ({ type: 'success', intent: 'analyze_portfolio', n })));
  });

  it('counts the failures of each capability seen within the window, of the intent and tenant only', async () => {
    const memory = new Memory(() => em);
    const failure = (capability: string) => ({ intent: 'analyze_portfolio', capability, code: 'TOOL_FAILED', message: 'down' });
    await memory.recordFailurePattern('t1', failure('quotes.live'));
    await memory.recordFailurePattern('t1', failure('quotes.live'));
    await memory.recordFailurePattern('t1', failure('risk.model'));
    await memory.recordFailurePattern('t2', failure('quotes.live'));
    await memory.recordFailurePattern('t1', { ...failure('quotes.live'), intent: 'rebalance' });
    // Seen before the window: its capability gets its chance again.
    await memory.recordFailurePattern('t1', failure('news.feed'));
    await em.execute(`UPDATE memory SET created_at = now() - interval '${FAILURE_MEMORY_MS + 60_000} milliseconds' WHERE key = 'failure:analyze_portfolio:news.feed:TOOL_FAILED'`);
    expect((await memory.intentHints('t1', 'analyze_portfolio')).failure_counts).toEqual({ 'quotes.live': 2, 'risk.model': 1 });
    expect(await memory.intentHints('t3', 'analyze_portfolio')).toEqual({ failure_counts: {}, similar_successes: [] });
  });

  it('reads both through their key index alone, in the plan PostgreSQL keeps', async () => {
    const read = intentHintsRead('t1', 'analyze_portfolio', 5);
    // The statement as ABC prepares it (executeOne).
    const statement = prepared(read.sql);
    const conn = await (await nativePool(store.orm)).connect();
    try {
      // A prepared statement's generic plan: the one it settles on after its first executions.
      await conn.query('SET plan_cache_mode = force_generic_plan');
      await conn.query({ ...statement, values: read.params });
      const values = read.params.map((v) => (typeof v === 'number' ? String(v) : conn.escapeLiteral(String(v))));
      const [{ 'QUERY PLAN': plan }] = (await conn.query(`EXPLAIN (FORMAT JSON) EXECUTE ${statement.name}(${values.join(', ')})`)).rows;
      const scans = [...JSON.stringify(plan).matchAll(/"Node Type":"([^"]*Scan)"(?:[^{}]*?"Index Name":"([^"]+)")?/g)].map((m) => `${m[1]} ${m[2] ?? ''}`.trim());
      expect(scans).toEqual(['Index Scan idx_memory_key_bytes', 'Index Scan idx_memory_key_bytes']);
    } finally {
      conn.release();
    }
  });

  it("hands a ticket's context build the hints read ahead for it, once, and reads again for another tenant or intent", async () => {
    const memory = new Memory(() => em);
    const key = 'success:plan_trip:tkt_ahead';
    await Promise.all(['tkt_a', 'tkt_b', 'tkt_c'].map((ticket) => memory.readAhead(ticket, 't1', 'plan_trip')));
    // Written after the reads ahead: a read now sees it, the reads ahead do not.
    await em.execute(`INSERT INTO memory (memory_id, tenant_id, scope, scope_id, key, value, tags) VALUES ('case_ahead', 't1', 'GLOBAL', 'global', ?, '{"type": "success", "intent": "plan_trip"}', '[]')`, [key]);
    const now = { failure_counts: {}, similar_successes: [{ type: 'success', intent: 'plan_trip' }] };
    expect(await memory.intentHints('t1', 'plan_trip', 'tkt_a')).toEqual({ failure_counts: {}, similar_successes: [] });
    // Taken once: the next build of the same ticket reads.
    expect(await memory.intentHints('t1', 'plan_trip', 'tkt_a')).toEqual(now);
    expect(await memory.intentHints('t2', 'plan_trip', 'tkt_b')).toEqual({ failure_counts: {}, similar_successes: [] });
    expect(await memory.intentHints('t1', 'plan_trip', 'tkt_b')).toEqual(now);
    memory.dropReadAhead('tkt_c');
    expect(await memory.intentHints('t1', 'plan_trip', 'tkt_c')).toEqual(now);
  });

  it('reads again when the read ahead failed', async () => {
    // The read ahead goes through an ORM whose database is gone; the context build's own through the open one.
    const gone = await createTestDatabase();
    const lost = await createOrm({ url: gone.url, poolMax: 1 });
    await gone.drop();
    try {
      const ems = [lost.em.fork(), em];
      const memory = new Memory(() => ems.shift()!);
      await memory.readAhead('tkt_x', 't1', 'analyze_portfolio');
      const hints = await memory.intentHints('t1', 'analyze_portfolio', 'tkt_x');
      expect(hints.similar_successes).toHaveLength(5);
      expect(ems).toEqual([]);
    } finally {
      await lost.close().catch(() => undefined);
    }
  });
});
