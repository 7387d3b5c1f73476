import { Migration } from '@mikro-orm/migrations';
import { COMMIT_STEP_V1 } from './Migration20261124070000_step_commit_function.js';

// A tool call's commits as one call each (orchestrator/tool-calls.ts):
// - abc_open_tool_call: the idempotency claim, the call in the state its first
//   hops reach, its execution contract with their transition records, and the
//   run's events;
// - abc_move_tool_call: a hop of a call, its contract's moves with their fact,
//   and the run's events.
// The hops are decided by the machines' transition() before the call; each
// write is guarded by the state it expects, and a row in another state aborts
// the call (SQLSTATE ABC01) with nothing written. abc_move_contract is the
// contract's part, shared with abc_commit_step. Contracts of a run are found by
// (run_id, subject_id): an index on run_id alone scanned every call of the run.
/** abc_commit_step as this migration made it (a later one rewrites it, and goes back to it on down). */
export const COMMIT_STEP_V2 = `create or replace function "abc_commit_step"(p jsonb) returns setof "ticket_steps" language plpgsql as $fn$
declare
  v_step ticket_steps;
  v_contract record;
  v_base bigint;
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
  select * into v_contract from abc_move_contract(
    case when p ? 'contract' then (select e.execution_id from execution_contracts e where e.subject_id = p->>'step_id' and e.ticket = p->>'ticket' order by e.created_at desc limit 1) end,
    p->'contract');

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
  select p->>'ticket', v_base + e.n, (p->>'ts')::bigint, e.type, e.payload
  from jsonb_to_recordset(abc_contract_events(p->'events', v_contract.o_execution_id, v_contract.o_summary, v_contract.o_irreversible, v_contract.o_fact_error)) as e(n int, type text, payload jsonb);
  perform pg_notify(p->>'channel', p->>'ticket');
  return next v_step;
end
$fn$`;

/** abc_open_tool_call as this migration made it (migration tool_call_events wraps it, and goes back to it on down). */
export const OPEN_TOOL_CALL_V1 = `create or replace function "abc_open_tool_call"(p jsonb) returns setof "tool_calls" language plpgsql as $fn$
declare
  v_call tool_calls;
  v_run runs;
  c jsonb := p->'call';
  k jsonb := p->'contract';
begin
  insert into idempotency_keys (scope, key, request_hash, expires_at, response)
  values ('tool_call', c->>'idempotency_key', p->>'hash', now() + ((p->>'ttl_ms')::bigint * interval '1 millisecond'), jsonb_build_object('tool_call_id', c->>'tool_call_id'))
  on conflict (scope, key) do update set request_hash = excluded.request_hash, response = excluded.response, created_at = now(), expires_at = excluded.expires_at
  where idempotency_keys.expires_at <= now();
  if not found then
    return; -- a live claim: the caller answers with its call
  end if;
  select * into v_run from runs r where r.run_id = c->>'run_id';
  if not found or v_run.status in (select jsonb_array_elements_text(p->'ended')) then
    raise exception using errcode = 'ABC01', message = 'abc_open_tool_call: the run is not active';
  end if;
  -- Seed 004 resume alignment: an irreversible action whose key already completed is the caller's to refuse.
  if exists (select 1 from execution_contracts o where o.idempotency_key = c->>'idempotency_key' and o.session_id = v_run.session_id and o.status = 'completed' and o.irreversible) then
    raise exception using errcode = 'ABC01', message = 'abc_open_tool_call: an irreversible action with this key completed';
  end if;
  insert into tool_calls (tool_call_id, run_id, tool_name, kind, status, args, idempotency_key, timeout_ms, traceparent, version, started_at, deadline_at)
  values (c->>'tool_call_id', c->>'run_id', c->>'tool_name', c->>'kind', c->>'status', c->'args', c->>'idempotency_key', (c->>'timeout_ms')::int, c->>'traceparent',
          1 + (c->>'hops')::int, case when (c->>'started')::boolean then now() end, now() + ((c->>'deadline_ms')::int * interval '1 millisecond'))
  returning * into v_call;
  insert into execution_contracts (execution_id, tenant_id, session_id, run_id, subject_id, action_type, action_summary, status, irreversible, idempotency_key,
                                   timeout_seconds, created_at, entered_at, version)
  values (k->>'execution_id', v_run.tenant_id, v_run.session_id, v_run.run_id, c->>'tool_call_id', 'tool_call', k->>'action_summary', k->>'status',
          (k->>'irreversible')::boolean, c->>'idempotency_key', (k->>'timeout_seconds')::int, (k->>'created_at')::timestamptz, (k->>'at')::timestamptz,
          1 + jsonb_array_length(k->'hops'));
  insert into execution_transitions (execution_id, sequence_number, from_status, to_status, trigger, actor, actor_category, ts)
  select k->>'execution_id', h.n - 1, h.from_status, h.to_status, h.trigger, h.actor, h.actor_category, h.ts
  from jsonb_to_recordset(k->'hops') as h(n int, from_status text, to_status text, trigger text, actor text, actor_category text, ts timestamptz);
  perform 1 from abc_append_events(p->'events', p->'wanted', p->>'channel', '');
  return next v_call;
end
$fn$`;

/** abc_move_tool_call as this migration made it (likewise). */
export const MOVE_TOOL_CALL_V1 = `create or replace function "abc_move_tool_call"(p jsonb) returns setof "tool_calls" language plpgsql as $fn$
declare
  v_call tool_calls;
  v_contract record;
begin
  update tool_calls t set status = p->>'to', version = t.version + 1,
    result = case when p ? 'result' then p->'result' else t.result end,
    error = coalesce(p->'error', t.error),
    started_at = case when (p->>'started')::boolean then now() else t.started_at end,
    completed_at = case when (p->>'completed')::boolean then now() else t.completed_at end
  where t.tool_call_id = p->>'tool_call_id' and t.status = p->>'from'
  returning * into v_call;
  if not found then
    raise exception using errcode = 'ABC01', message = 'abc_move_tool_call: the call is not ' || (p->>'from');
  end if;
  select * into v_contract from abc_move_contract(
    case when p ? 'contract' then (select e.execution_id from execution_contracts e where e.run_id = v_call.run_id and e.subject_id = v_call.tool_call_id order by e.created_at desc limit 1) end,
    p->'contract');
  perform 1 from abc_append_events(abc_contract_events(p->'events', v_contract.o_execution_id, v_contract.o_summary, v_contract.o_irreversible, v_contract.o_fact_error), p->'wanted', p->>'channel', '');
  return next v_call;
end
$fn$`;

/** Events with the contract's id, summary and side effects (and a fact's error) on each execution_state (migration steps_records_function changes it). */
export const CONTRACT_EVENTS_V1 = `create or replace function "abc_contract_events"(p_events jsonb, p_execution_id text, p_summary text, p_irreversible boolean, p_fact_error text)
  returns jsonb language sql immutable as $fn$
  select coalesce(jsonb_agg(case when e->>'type' = 'execution_state' and p_execution_id is not null then
      jsonb_set(e, '{payload}', (e->'payload') || jsonb_build_object('execution_id', p_execution_id, 'action_summary', p_summary, 'has_side_effects', p_irreversible)
        || case when p_fact_error is not null and (e->'payload'->>'is_terminal')::boolean then jsonb_build_object('fact_error', p_fact_error) else '{}'::jsonb end)
    else e end order by x.ord), '[]'::jsonb)
  from jsonb_array_elements(p_events) with ordinality as x(e, ord)
$fn$`;

// Seed 004's fact of a contract's terminal move, best-effort: its error, or null.
export const EXECUTION_FACT_V1 = `create or replace function "abc_execution_fact"(p_execution_id text, p_fact_id text) returns text language plpgsql as $fn$
begin
  insert into memory (memory_id, tenant_id, scope, scope_id, key, value, tags)
  select p_fact_id, e.tenant_id, 'SESSION', e.session_id, 'execution_fact:' || e.execution_id,
         jsonb_build_object('type', 'execution_fact', 'execution_id', e.execution_id, 'action_type', e.action_type,
           'action_summary', e.action_summary, 'final_status', e.status, 'irreversible', e.irreversible,
           'duration_ms', floor(extract(epoch from (select max(t.ts) from execution_transitions t where t.execution_id = e.execution_id) - e.created_at) * 1000),
           'result_summary', left(e.result, 200), 'error_summary', left(e.error_message, 200)),
         '["execution_fact"]'::jsonb
  from execution_contracts e where e.execution_id = p_execution_id;
  return null;
exception when others then
  return left(sqlerrm, 200);
end
$fn$`;

export class Migration20261124100000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('create index "idx_execution_contracts_run_subject" on "execution_contracts" ("run_id", "subject_id")');
    this.addSql('drop index "idx_execution_contracts_run"');

    this.addSql(EXECUTION_FACT_V1);

    // A contract's moves (decided by the caller) with a transition record per hop, and the fact of a terminal one; no moves (null), no row.
    this.addSql(`create or replace function "abc_move_contract"(p_execution_id text, c jsonb,
  out o_execution_id text, out o_summary text, out o_irreversible boolean, out o_fact_error text) language plpgsql as $fn$
declare
  v_hops int := jsonb_array_length(c->'hops');
  v_version int;
  v_seq int;
begin
  if c is null then
    return;
  end if;
  update execution_contracts e set status = c->>'to', entered_at = (c->>'at')::timestamptz,
    result = coalesce(c->>'result', e.result), error_message = coalesce(c->>'error_message', e.error_message),
    version = e.version + v_hops
  where e.execution_id = p_execution_id and e.status = c->>'from'
  returning e.execution_id, e.action_summary, e.irreversible, e.version into o_execution_id, o_summary, o_irreversible, v_version;
  if not found then
    raise exception using errcode = 'ABC01', message = 'abc_move_contract: the execution contract is not ' || (c->>'from');
  end if;
  select greatest(v_version - 1 - v_hops, coalesce(max(t.sequence_number) + 1, 0)) into v_seq from execution_transitions t where t.execution_id = o_execution_id;
  insert into execution_transitions (execution_id, sequence_number, from_status, to_status, trigger, actor, actor_category, ts)
  select o_execution_id, v_seq + h.n - 1, h.from_status, h.to_status, h.trigger, h.actor, h.actor_category, h.ts
  from jsonb_to_recordset(c->'hops') as h(n int, from_status text, to_status text, trigger text, actor text, actor_category text, ts timestamptz);
  if (c->>'terminal')::boolean then
    o_fact_error := abc_execution_fact(o_execution_id, c->>'fact_id');
  end if;
end
$fn$`);

    this.addSql(CONTRACT_EVENTS_V1);

    // The step commit of migration step_commit_function, with its contract's part in abc_move_contract.
    this.addSql(COMMIT_STEP_V2);

    this.addSql(OPEN_TOOL_CALL_V1);

    this.addSql(MOVE_TOOL_CALL_V1);
  }

  override async down(): Promise<void> {
    this.addSql(COMMIT_STEP_V1);
    this.addSql('drop function if exists "abc_move_tool_call"(jsonb)');
    this.addSql('drop function if exists "abc_open_tool_call"(jsonb)');
    this.addSql('drop function if exists "abc_contract_events"(jsonb, text, text, boolean, text)');
    this.addSql('drop function if exists "abc_move_contract"(text, jsonb)');
    this.addSql('drop function if exists "abc_execution_fact"(text, text)');
    this.addSql('create index "idx_execution_contracts_run" on "execution_contracts" ("run_id")');
    this.addSql('drop index "idx_execution_contracts_run_subject"');
  }
}
