import { Migration } from '@mikro-orm/migrations';
import { EXECUTION_FACT_V1 } from './Migration20261124100000_tool_call_commit_functions.js';

// Several steps' records for a ticket move's statement (a batch's held step
// ends, written with its review or its packaging) as abc_steps_records: what
// abc_step_records writes for each, in a few set-based statements instead of
// six or more per step. The steps' moves, their contracts' moves with a
// transition record per hop, the facts of terminal ones (best-effort, each
// with its own error, as abc_execution_fact writes them), the steps' memory,
// and their events in order. A step or a contract in another state than its
// moves start from aborts the statement (SQLSTATE ABC01) with nothing written.

// What a contract's fact says, for abc_execution_fact and abc_steps_records alike.
const FACT_VALUE = `create function "abc_execution_fact_value"(e execution_contracts) returns jsonb language sql stable as $fn$
  select jsonb_build_object('type', 'execution_fact', 'execution_id', e.execution_id, 'action_type', e.action_type,
    'action_summary', e.action_summary, 'final_status', e.status, 'irreversible', e.irreversible,
    'duration_ms', floor(extract(epoch from (select max(t.ts) from execution_transitions t where t.execution_id = e.execution_id) - e.created_at) * 1000),
    'result_summary', left(e.result, 200), 'error_summary', left(e.error_message, 200))
$fn$`;

const EXECUTION_FACT_V2 = `create or replace function "abc_execution_fact"(p_execution_id text, p_fact_id text) returns text language plpgsql as $fn$
begin
  insert into memory (memory_id, tenant_id, scope, scope_id, key, value, tags)
  select p_fact_id, e.tenant_id, 'SESSION', e.session_id, 'execution_fact:' || e.execution_id, abc_execution_fact_value(e), '["execution_fact"]'::jsonb
  from execution_contracts e where e.execution_id = p_execution_id;
  return null;
exception when others then
  return left(sqlerrm, 200);
end
$fn$`;

const STEPS_RECORDS = `create function "abc_steps_records"(p jsonb) returns jsonb language plpgsql as $fn$
declare
  -- One ticket's steps: each lookup is by the ticket first, which the planner reads by index whatever it guesses of the calls.
  v_ticket text := p->0->>'ticket';
  v_steps int;
  v_moves int;
  v_moved jsonb;
  v_fact record;
  v_call jsonb;
begin
  with calls as (
    select x.c, x.ord from jsonb_array_elements(p) with ordinality as x(c, ord)
  ), steps as (
    update ticket_steps s set status = c->>'to',
      output = coalesce(c->'output', s.output),
      message = coalesce(c->>'message', s.message),
      capability = coalesce(c->>'capability', s.capability),
      side_effect = coalesce((c->>'side_effect')::boolean, s.side_effect),
      started_at = case when (c->>'started')::boolean then now() else s.started_at end,
      ended_at = case when (c->>'ended')::boolean then now() else s.ended_at end
    from calls where s.ticket = v_ticket and s.step_id = c->>'step_id' and s.status = c->>'from' and c->>'ticket' = v_ticket
    returning s.step_id
  ), latest as (
    select distinct on (e.subject_id) e.subject_id, e.execution_id from execution_contracts e where e.ticket = v_ticket order by e.subject_id, e.created_at desc
  ), targets as (
    select calls.ord, calls.c->'contract' as k, latest.execution_id
    from calls join latest on latest.subject_id = calls.c->>'step_id' where calls.c ? 'contract'
  ), contracts as (
    update execution_contracts e set status = t.k->>'to', entered_at = (t.k->>'at')::timestamptz,
      result = coalesce(t.k->>'result', e.result), error_message = coalesce(t.k->>'error_message', e.error_message),
      version = e.version + jsonb_array_length(t.k->'hops')
    from targets t where e.ticket = v_ticket and e.execution_id = t.execution_id and e.status = t.k->>'from'
    returning t.ord, t.k, e.execution_id, e.action_summary, e.irreversible, e.version
  ), transitions as (
    insert into execution_transitions (execution_id, sequence_number, from_status, to_status, trigger, actor, actor_category, ts)
    select m.execution_id,
      greatest(m.version - 1 - jsonb_array_length(m.k->'hops'), coalesce((select max(t.sequence_number) + 1 from execution_transitions t where t.execution_id = m.execution_id), 0)) + h.n - 1,
      h.from_status, h.to_status, h.trigger, h.actor, h.actor_category, h.ts
    from contracts m, jsonb_to_recordset(m.k->'hops') as h(n int, from_status text, to_status text, trigger text, actor text, actor_category text, ts timestamptz)
  )
  select (select count(*) from steps), (select count(*) from contracts),
    (select coalesce(jsonb_object_agg(m.ord::text, jsonb_build_object('execution_id', m.execution_id, 'summary', m.action_summary, 'irreversible', m.irreversible,
       'terminal', coalesce((m.k->>'terminal')::boolean, false), 'fact_id', m.k->>'fact_id')), '{}'::jsonb) from contracts m)
  into v_steps, v_moves, v_moved;
  if v_steps <> jsonb_array_length(p) then
    raise exception using errcode = 'ABC01', message = 'abc_steps_records: a step is not in the state its moves start from';
  end if;
  if v_moves <> (select count(*) from jsonb_array_elements(p) as x(c) where x.c ? 'contract') then
    raise exception using errcode = 'ABC01', message = 'abc_steps_records: an execution contract is not in the state its moves start from';
  end if;
  -- The facts together; if one cannot be written, each alone, to keep the others and learn its error.
  begin
    insert into memory (memory_id, tenant_id, scope, scope_id, key, value, tags)
    select m.value->>'fact_id', e.tenant_id, 'SESSION', e.session_id, 'execution_fact:' || e.execution_id, abc_execution_fact_value(e), '["execution_fact"]'::jsonb
    from jsonb_each(v_moved) as m join execution_contracts e on e.ticket = v_ticket and e.execution_id = m.value->>'execution_id'
    where (m.value->>'terminal')::boolean;
  exception when others then
    for v_fact in select m.key, m.value from jsonb_each(v_moved) as m where (m.value->>'terminal')::boolean loop
      v_moved := jsonb_set(v_moved, array[v_fact.key, 'fact_error'], coalesce(to_jsonb(abc_execution_fact(v_fact.value->>'execution_id', v_fact.value->>'fact_id')), 'null'::jsonb));
    end loop;
  end;
  -- Each step's memory alone: two steps may write the same key, the later one wins.
  for v_call in select x.c from jsonb_array_elements(p) with ordinality as x(c, ord) where jsonb_array_length(coalesce(x.c->'memory', '[]')) > 0 order by x.ord loop
    insert into memory (memory_id, tenant_id, scope, scope_id, key, value, tags)
    select m.memory_id, m.tenant_id, m.scope, m.scope_id, m.key, m.value, m.tags
    from jsonb_to_recordset(v_call->'memory') as m(memory_id text, tenant_id text, scope text, scope_id text, key text, value jsonb, tags jsonb)
    on conflict (tenant_id, scope, scope_id, key) do update set value = excluded.value, tags = excluded.tags, created_at = now();
  end loop;
  -- The events in order, each contract's execution_state events with its id, summary and side effects (abc_contract_events).
  return (select coalesce(jsonb_agg(y.e order by x.ord, y.ord), '[]'::jsonb)
    from jsonb_array_elements(p) with ordinality as x(c, ord)
    cross join lateral (select v_moved->(x.ord::text) as m) as moved
    cross join lateral jsonb_array_elements(abc_contract_events(x.c->'events', m->>'execution_id', m->>'summary', (m->>'irreversible')::boolean, m->>'fact_error')) with ordinality as y(e, ord));
end
$fn$`;

export class Migration20261129020000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(FACT_VALUE);
    this.addSql(EXECUTION_FACT_V2);
    this.addSql(STEPS_RECORDS);
  }

  override async down(): Promise<void> {
    this.addSql('drop function if exists "abc_steps_records"(jsonb)');
    this.addSql(EXECUTION_FACT_V1);
    this.addSql('drop function if exists "abc_execution_fact_value"(execution_contracts)');
  }
}
