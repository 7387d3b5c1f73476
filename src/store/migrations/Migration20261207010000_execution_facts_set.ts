import { Migration } from '@mikro-orm/migrations';
import { EXECUTION_FACT_V1 } from './Migration20261124100000_tool_call_commit_functions.js';
import { EXECUTION_FACT_V2, EXECUTION_FACTS } from './Migration20261129060000_execution_facts_together.js';

// abc_execution_facts wrote its facts one INSERT each, because one INSERT of
// them all was planned again on every call: the planner sizes an unnest of a
// known array by its length, so each call's own plan looked cheaper than the
// cached generic one. With the function's plans generic, one INSERT writes them
// all, planned once per connection. A generic plan keeps the statistics it was
// made with until the next ANALYZE: made on a new database's empty tables, a
// join of the contracts would hash them whole. Each contract is looked up by its
// key instead (a lateral subquery, which the planner joins by nested loop).
// Under one exception block as before: when one fails, none is written, and
// abc_steps_records writes each alone. One fact (a tool call's, or one of those
// retried alone) goes by abc_execution_fact's own INSERT again, whose lookup by
// key needs no setting.
export const EXECUTION_FACTS_V2 = `create or replace function "abc_execution_facts"(p_execution_ids text[], p_fact_ids text[]) returns text language plpgsql
  set plan_cache_mode = force_generic_plan as $fn$
begin
  insert into memory (memory_id, tenant_id, scope, scope_id, key, value, tags)
  select f.fact_id, e.tenant_id, 'SESSION', e.session_id, 'execution_fact:' || e.execution_id,
         jsonb_build_object('type', 'execution_fact', 'execution_id', e.execution_id, 'action_type', e.action_type,
           'action_summary', e.action_summary, 'final_status', e.status, 'irreversible', e.irreversible,
           'duration_ms', floor(extract(epoch from e.last_ts - e.created_at) * 1000),
           'result_summary', left(e.result, 200), 'error_summary', left(e.error_message, 200)),
         '["execution_fact"]'::jsonb
  from unnest(p_execution_ids, p_fact_ids) with ordinality as f(execution_id, fact_id, ord)
  cross join lateral (
    select c.*, (select max(t.ts) from execution_transitions t where t.execution_id = c.execution_id) as last_ts
    from execution_contracts c where c.execution_id = f.execution_id offset 0
  ) e
  order by f.ord;
  return null;
exception when others then
  return left(sqlerrm, 200);
end
$fn$`;

export class Migration20261207010000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(EXECUTION_FACTS_V2);
    this.addSql(EXECUTION_FACT_V1);
  }

  override async down(): Promise<void> {
    this.addSql(EXECUTION_FACTS.replace('create function', 'create or replace function'));
    this.addSql(EXECUTION_FACT_V2);
  }
}
