import { Migration } from '@mikro-orm/migrations';
import { EXECUTION_FACT_V1 } from './Migration20261124100000_tool_call_commit_functions.js';
import { edit } from './Migration20261124150000_run_commit_events.js';
import { STEPS_RECORDS } from './Migration20261129020000_steps_records_function.js';

// The facts of a move's terminal contracts under one transaction id.
// abc_steps_records wrote each by abc_execution_fact, whose exception block is
// a subtransaction with a transaction id of its own: seven of a sync
// contract's twelve. Now abc_execution_facts writes several under one
// exception block; when one fails, none is written, and each is written alone
// again, so that a fact's error is its own step's. abc_execution_fact becomes
// its call with one fact.

// Seed 004's facts of terminal contract moves, best-effort: the first error, with none written, or null. One
// insert a fact, each planned once by its execution id (a list of ids in one statement was planned again on every call).
export const EXECUTION_FACTS = `create function "abc_execution_facts"(p_execution_ids text[], p_fact_ids text[]) returns text language plpgsql as $fn$
begin
  for i in 1 .. coalesce(cardinality(p_execution_ids), 0) loop
    insert into memory (memory_id, tenant_id, scope, scope_id, key, value, tags)
    select p_fact_ids[i], e.tenant_id, 'SESSION', e.session_id, 'execution_fact:' || e.execution_id,
           jsonb_build_object('type', 'execution_fact', 'execution_id', e.execution_id, 'action_type', e.action_type,
             'action_summary', e.action_summary, 'final_status', e.status, 'irreversible', e.irreversible,
             'duration_ms', floor(extract(epoch from (select max(t.ts) from execution_transitions t where t.execution_id = e.execution_id) - e.created_at) * 1000),
             'result_summary', left(e.result, 200), 'error_summary', left(e.error_message, 200)),
           '["execution_fact"]'::jsonb
    from execution_contracts e where e.execution_id = p_execution_ids[i];
  end loop;
  return null;
exception when others then
  return left(sqlerrm, 200);
end
$fn$`;

export const EXECUTION_FACT_V2 = `create or replace function "abc_execution_fact"(p_execution_id text, p_fact_id text) returns text language sql as $fn$
  select abc_execution_facts(array[p_execution_id], array[p_fact_id])
$fn$`;

const STEPS_RECORDS_V2 = edit(
  STEPS_RECORDS,
  ['create function "abc_steps_records"(p jsonb)', 'create or replace function "abc_steps_records"(p jsonb)'],
  ['  v_call jsonb;', '  v_call jsonb;\n  v_ids text[];\n  v_fact_ids text[];\n  v_facts_error text;'],
  [
    "  -- The facts of terminal moves, each best-effort: abc_execution_fact's error, or null.\n" +
      "  for v_fact in select m.key, m.value from jsonb_each(v_moved) as m where (m.value->>'terminal')::boolean loop\n" +
      "    v_moved := jsonb_set(v_moved, array[v_fact.key, 'fact_error'], coalesce(to_jsonb(abc_execution_fact(v_fact.value->>'execution_id', v_fact.value->>'fact_id')), 'null'::jsonb));\n" +
      '  end loop;\n',
    "  -- The facts of terminal moves, best-effort: under one exception block; when one fails, each alone, with its own error or null.\n" +
      "  select array_agg(m.value->>'execution_id'), array_agg(m.value->>'fact_id') into v_ids, v_fact_ids\n" +
      "  from jsonb_each(v_moved) as m where (m.value->>'terminal')::boolean;\n" +
      '  if cardinality(v_ids) > 1 then\n' +
      '    v_facts_error := abc_execution_facts(v_ids, v_fact_ids);\n' +
      '  end if;\n' +
      '  if cardinality(v_ids) = 1 or v_facts_error is not null then\n' +
      "    for v_fact in select m.key, m.value from jsonb_each(v_moved) as m where (m.value->>'terminal')::boolean loop\n" +
      "      v_moved := jsonb_set(v_moved, array[v_fact.key, 'fact_error'], coalesce(to_jsonb(abc_execution_fact(v_fact.value->>'execution_id', v_fact.value->>'fact_id')), 'null'::jsonb));\n" +
      '    end loop;\n' +
      '  end if;\n',
  ],
);

export class Migration20261129060000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(EXECUTION_FACTS);
    this.addSql(EXECUTION_FACT_V2);
    this.addSql(STEPS_RECORDS_V2);
  }

  override async down(): Promise<void> {
    this.addSql(STEPS_RECORDS.replace('create function', 'create or replace function'));
    this.addSql(EXECUTION_FACT_V1);
    this.addSql('drop function if exists "abc_execution_facts"(text[], text[])');
  }
}
