import { Migration } from '@mikro-orm/migrations';
import { COMMIT_STEP_V2 } from './Migration20261124100000_tool_call_commit_functions.js';

// A step commit's own records as one function, abc_step_records: the step row,
// its execution contract's moves (abc_move_contract) and the step's memory; it
// returns the step's events with their contract's facts, for the caller to
// append. abc_commit_step appends them to the ticket's log itself; a ticket
// move appends them ahead of its own in its statement (a batch's last step
// with its review). A row in another state than the moves start from aborts
// the statement (SQLSTATE ABC01) with nothing written.
/** abc_commit_step as this migration defines it (migration announce_after_commit changes it). */
export const COMMIT_STEP_V3 = `create or replace function "abc_commit_step"(p jsonb) returns setof "ticket_steps" language plpgsql as $fn$
declare
  v_events jsonb := abc_step_records(p);
  v_base bigint;
  v_count int := jsonb_array_length(p->'events');
begin
  update tickets t set event_seq = t.event_seq + v_count,
    partial_result = case when p ? 'partial_result' then (p->>'partial_result')::json else t.partial_result end,
    updated_at = case when p ? 'partial_result' then now() else t.updated_at end
  where t.ticket = p->>'ticket'
  returning t.event_seq - v_count into v_base;
  insert into ticket_events (ticket, seq, ts, type, payload)
  select p->>'ticket', v_base + e.n, (p->>'ts')::bigint, e.type, e.payload
  from jsonb_to_recordset(v_events) as e(n int, type text, payload jsonb);
  perform pg_notify(p->>'channel', p->>'ticket');
  return query select * from ticket_steps s where s.ticket = p->>'ticket' and s.step_id = p->>'step_id';
end
$fn$`;

/** abc_step_records as this migration defines it (migration steps_records_function makes it a call of abc_steps_records). */
export const STEP_RECORDS_V1 = `create or replace function "abc_step_records"(p jsonb) returns jsonb language plpgsql as $fn$
declare
  v_contract record;
begin
  update ticket_steps s set status = p->>'to',
    output = coalesce(p->'output', s.output),
    message = coalesce(p->>'message', s.message),
    capability = coalesce(p->>'capability', s.capability),
    side_effect = coalesce((p->>'side_effect')::boolean, s.side_effect),
    started_at = case when (p->>'started')::boolean then now() else s.started_at end,
    ended_at = case when (p->>'ended')::boolean then now() else s.ended_at end
  where s.ticket = p->>'ticket' and s.step_id = p->>'step_id' and s.status = p->>'from';
  if not found then
    raise exception using errcode = 'ABC01', message = 'abc_step_records: the step is not ' || (p->>'from');
  end if;
  select * into v_contract from abc_move_contract(
    case when p ? 'contract' then (select e.execution_id from execution_contracts e where e.subject_id = p->>'step_id' and e.ticket = p->>'ticket' order by e.created_at desc limit 1) end,
    p->'contract');
  insert into memory (memory_id, tenant_id, scope, scope_id, key, value, tags)
  select m.memory_id, m.tenant_id, m.scope, m.scope_id, m.key, m.value, m.tags
  from jsonb_to_recordset(coalesce(p->'memory', '[]')) as m(memory_id text, tenant_id text, scope text, scope_id text, key text, value jsonb, tags jsonb)
  on conflict (tenant_id, scope, scope_id, key) do update set value = excluded.value, tags = excluded.tags, created_at = now();
  return abc_contract_events(p->'events', v_contract.o_execution_id, v_contract.o_summary, v_contract.o_irreversible, v_contract.o_fact_error);
end
$fn$`;

export class Migration20261124140000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(STEP_RECORDS_V1);

    this.addSql(COMMIT_STEP_V3);
  }

  override async down(): Promise<void> {
    this.addSql(COMMIT_STEP_V2);
    this.addSql('drop function if exists "abc_step_records"(jsonb)');
  }
}
