import { Migration } from '@mikro-orm/migrations';
import { CONTRACT_EVENTS_V1 } from './Migration20261124100000_tool_call_commit_functions.js';
import { STEP_RECORDS_V1 } from './Migration20261124140000_step_records_function.js';

// Several steps' records for a ticket move's statement (a batch's held step
// ends, written with its review or its packaging) as abc_steps_records, in a
// few set-based statements instead of six or more per step: the steps' moves,
// their contracts' moves with a transition record per hop, the facts of
// terminal ones (best-effort, by abc_execution_fact), the steps' memory, and
// their events in order. A step or a contract in another state than its moves
// start from aborts the statement (SQLSTATE ABC01) with nothing written.
// abc_step_records becomes its call with one step.

// An event with its contract's id, summary and side effects (and a fact's error) when it is an execution_state: one
// expression, inlined where it is called (stable, as jsonb_build_object is), for abc_contract_events and abc_steps_records alike.
const CONTRACT_EVENT = `create function "abc_contract_event"(e jsonb, p_execution_id text, p_summary text, p_irreversible boolean, p_fact_error text)
  returns jsonb language sql stable as $fn$
  select case when e->>'type' = 'execution_state' and p_execution_id is not null then
      jsonb_set(e, '{payload}', (e->'payload') || jsonb_build_object('execution_id', p_execution_id, 'action_summary', p_summary, 'has_side_effects', p_irreversible)
        || case when p_fact_error is not null and (e->'payload'->>'is_terminal')::boolean then jsonb_build_object('fact_error', p_fact_error) else '{}'::jsonb end)
    else e end
$fn$`;

const CONTRACT_EVENTS_V2 = `create or replace function "abc_contract_events"(p_events jsonb, p_execution_id text, p_summary text, p_irreversible boolean, p_fact_error text)
  returns jsonb language sql stable as $fn$
  select coalesce(jsonb_agg(abc_contract_event(x.e, p_execution_id, p_summary, p_irreversible, p_fact_error) order by x.ord), '[]'::jsonb)
  from jsonb_array_elements(p_events) with ordinality as x(e, ord)
$fn$`;

export const STEPS_RECORDS = `create function "abc_steps_records"(p jsonb) returns jsonb language plpgsql as $fn$
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
  ), targets as (
    select calls.ord, calls.c->'contract' as k,
      (select e.execution_id from execution_contracts e where e.ticket = v_ticket and e.subject_id = calls.c->>'step_id' order by e.created_at desc limit 1) as execution_id
    from calls where calls.c ? 'contract'
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
  -- The facts of terminal moves, each best-effort: abc_execution_fact's error, or null.
  for v_fact in select m.key, m.value from jsonb_each(v_moved) as m where (m.value->>'terminal')::boolean loop
    v_moved := jsonb_set(v_moved, array[v_fact.key, 'fact_error'], coalesce(to_jsonb(abc_execution_fact(v_fact.value->>'execution_id', v_fact.value->>'fact_id')), 'null'::jsonb));
  end loop;
  -- Each step's memory alone: two steps may write the same key, the later one wins.
  for v_call in select x.c from jsonb_array_elements(p) with ordinality as x(c, ord) where jsonb_array_length(coalesce(x.c->'memory', '[]')) > 0 order by x.ord loop
    insert into memory (memory_id, tenant_id, scope, scope_id, key, value, tags)
    select m.memory_id, m.tenant_id, m.scope, m.scope_id, m.key, m.value, m.tags
    from jsonb_to_recordset(v_call->'memory') as m(memory_id text, tenant_id text, scope text, scope_id text, key text, value jsonb, tags jsonb)
    on conflict (tenant_id, scope, scope_id, key) do update set value = excluded.value, tags = excluded.tags, created_at = now();
  end loop;
  -- The events in order, each contract's execution_state events with its id, summary and side effects.
  return (select coalesce(jsonb_agg(abc_contract_event(y.e, m->>'execution_id', m->>'summary', (m->>'irreversible')::boolean, m->>'fact_error') order by x.ord, y.ord), '[]'::jsonb)
    from jsonb_array_elements(p) with ordinality as x(c, ord)
    cross join lateral (select v_moved->(x.ord::text) as m) as moved
    cross join lateral jsonb_array_elements(x.c->'events') with ordinality as y(e, ord));
end
$fn$`;

// One step's records: the same call with one step (abc_commit_step's, and a step a move writes twice).
const STEP_RECORDS_V2 = `create or replace function "abc_step_records"(p jsonb) returns jsonb language sql as $fn$
  select abc_steps_records(jsonb_build_array(p))
$fn$`;

export class Migration20261129020000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(CONTRACT_EVENT);
    this.addSql(CONTRACT_EVENTS_V2);
    this.addSql(STEPS_RECORDS);
    this.addSql(STEP_RECORDS_V2);
  }

  override async down(): Promise<void> {
    this.addSql(STEP_RECORDS_V1);
    this.addSql('drop function if exists "abc_steps_records"(jsonb)');
    this.addSql(CONTRACT_EVENTS_V1);
    this.addSql('drop function if exists "abc_contract_event"(jsonb, text, text, boolean, text)');
  }
}
