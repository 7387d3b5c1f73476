// The context builder's similar success cases, with thousands of cases the
// final moves dropped and no vacuum since.
import type { EntityManager } from '@mikro-orm/postgresql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Memory, similarSuccessesRead } from '../../src/store/memory.js';
import { nativePool, prepared } from '../../src/store/native.js';
import { migratedOrm } from '../support/db.js';

describe('similar success cases', () => {
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
    const found = await new Memory(() => em).similarSuccesses('t1', 'analyze_portfolio', 5);
    expect(found.map((e) => e.key)).toEqual([4000, 3999, 3998, 3997, 3996].map((n) => `success:analyze_portfolio:tkt_0${n}`));
    expect(found[0]!.value).toEqual({ type: 'success', intent: 'analyze_portfolio', n: 4000 });
  });

  it('reads them through their key index alone, in the plan PostgreSQL keeps', async () => {
    const read = similarSuccessesRead('t1', 'analyze_portfolio', 5);
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
      expect(scans).toEqual(['Index Scan idx_memory_key_bytes']);
    } finally {
      conn.release();
    }
  });
});
