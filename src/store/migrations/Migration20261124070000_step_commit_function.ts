import { Migration } from '@mikro-orm/migrations';

// One commit of a contract step's moves (store/step-commit.ts) as one call:
// the step row, its execution contract with a transition record per hop and
// its fact, the step's memory, and the ticket events with their NOTIFY. The
// moves are decided by the machines' transition() before the call; each write
// here is guarded by the state it expects, and a row in any other state
// aborts the call (SQLSTATE ABC01) with nothing written.
/** The function as this migration made it (a later one rewrites it, and goes back to it on down). */
export const COMMIT_STEP_V1 = `create or replace function "abc_commit_step"(p jsonb) returns setof "ticket_steps" language plpgsql as $fn$
declare
  v_step ticket_steps;
  v_execution_id text;
  v_summary text;
  v_irreversible boolean;
  v_version int;
  v_hops int;
  v_seq int;
  v_base bigint;
  v_fact_error text;
  v_count int := jsonb_array_length(p->'events');
begin
  update ticket_steps s set status = p->>'to',
    output = coalesce(p->'output', s.output),
    message = coalesce(p->>'message', s.message),
    capability = coalesce(p->>'capability', s.capability),
    side_effect = coalesce((p->>'side_effect')::boolean, s.side_effect),
    started_at = case when (p->>'started')::boolean then now() else s.started_at end,
    ended_at = case when (p->>'ended')::boolean then now() else s.ended_at end
  where s.ticket = p->>'ticket' and s.step_id = p->>'step_id' and s.status = p->>'from'
  returning * into v_step;
  if not found then
    raise exception using errcode = 'ABC01', message = 'abc_commit_step: the step is not ' || (p->>'from');
  end if;

  if p ? 'contract' then
    v_hops := jsonb_array_length(p->'contract'->'hops');
    update execution_contracts c set status = p->'contract'->>'to', entered_at = (p->'contract'->>'at')::timestamptz,
      result = coalesce(p->'contract'->>'result', c.result), error_message = coalesce(p->'contract'->>'error_message', c.error_message),
      version = c.version + v_hops
    where c.execution_id = (select e.execution_id from execution_contracts e where e.subject_id = p->>'step_id' and e.ticket = p->>'ticket' order by e.created_at desc limit 1)
      and c.status = p->'contract'->>'from'
    returning c.execution_id, c.action_summary, c.irreversible, c.version into v_execution_id, v_summary, v_irreversible, v_version;
    if not found then
      raise exception using errcode = 'ABC01', message = 'abc_commit_step: the execution contract is not ' || (p->'contract'->>'from');
    end if;
    select greatest(v_version - 1 - v_hops, coalesce(max(t.sequence_number) + 1, 0)) into v_seq from execution_transitions t where t.execution_id = v_execution_id;
    insert into execution_transitions (execution_id, sequence_number, from_status, to_status, trigger, actor, actor_category, ts)
    select v_execution_id, v_seq + h.n - 1, h.from_status, h.to_status, h.trigger, h.actor, h.actor_category, h.ts
    from jsonb_to_recordset(p->'contract'->'hops') as h(n int, from_status text, to_status text, trigger text, actor text, actor_category text, ts timestamptz);
    -- Seed 004's fact of a terminal move: best-effort, as in execution-contracts.ts.
    if (p->'contract'->>'terminal')::boolean then
      begin
        insert into memory (memory_id, tenant_id, scope, scope_id, key, value, tags)
        select p->'contract'->>'fact_id', c.tenant_id, 'SESSION', c.session_id, 'execution_fact:' || c.execution_id,
               jsonb_build_object('type', 'execution_fact', 'execution_id', c.execution_id, 'action_type', c.action_type,
                 'action_summary', c.action_summary, 'final_status', c.status, 'irreversible', c.irreversible,
                 'duration_ms', floor(extract(epoch from (select max(t.ts) from execution_transitions t where t.execution_id = c.execution_id) - c.created_at) * 1000),
                 'result_summary', left(c.result, 200), 'error_summary', left(c.error_message, 200)),
               '["execution_fact"]'::jsonb
        from execution_contracts c where c.execution_id = v_execution_id;
      exception when others then
        v_fact_error := left(sqlerrm, 200);
      end;
    end if;
  end if;

  insert into memory (memory_id, tenant_id, scope, scope_id, key, value, tags)
  select m.memory_id, m.tenant_id, m.scope, m.scope_id, m.key, m.value, m.tags
  from jsonb_to_recordset(coalesce(p->'memory', '[]')) as m(memory_id text, tenant_id text, scope text, scope_id text, key text, value jsonb, tags jsonb)
  on conflict (tenant_id, scope, scope_id, key) do update set value = excluded.value, tags = excluded.tags, created_at = now();

  update tickets t set event_seq = t.event_seq + v_count,
    partial_result = case when p ? 'partial_result' then (p->>'partial_result')::json else t.partial_result end,
    updated_at = case when p ? 'partial_result' then now() else t.updated_at end
  where t.ticket = p->>'ticket'
  returning t.event_seq - v_count into v_base;
  insert into ticket_events (ticket, seq, ts, type, payload)
  select p->>'ticket', v_base + e.n, (p->>'ts')::bigint, e.type,
         case when e.type = 'execution_state' then
           e.payload || jsonb_build_object('execution_id', v_execution_id, 'action_summary', v_summary, 'has_side_effects', v_irreversible)
             || case when v_fact_error is not null and (e.payload->>'is_terminal')::boolean then jsonb_build_object('fact_error', v_fact_error) else '{}'::jsonb end
         else e.payload end
  from jsonb_to_recordset(p->'events') as e(n int, type text, payload jsonb);
  perform pg_notify(p->>'channel', p->>'ticket');
  return next v_step;
end
$fn$`;

export class Migration20261124070000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(COMMIT_STEP_V1);
  }

  override async down(): Promise<void> {
    this.addSql('drop function if exists "abc_commit_step"(jsonb)');
  }
}
