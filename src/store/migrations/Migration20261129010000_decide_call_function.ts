import { Migration } from '@mikro-orm/migrations';

// A decision on a held call's approval was a transaction of eleven
// statements. abc_decide_call writes it in one, as the core decided it from
// what it read: the approval's move from PENDING, the call's from
// WAITING_APPROVAL (only while it has the arguments the human was shown),
// both contracts' moves (abc_move_contract: a transition record per hop, the
// fact of a terminal one), the run's resume when nothing else holds it, and
// the events, numbered after the run's (abc_append_run_events). The run's row
// is locked before its calls are counted, so two decisions of one run take
// turns, and the second sees the first's call decided. Anything else than what
// the core read (another state of the approval, the call or the run, other
// arguments, a run with a parent, a contract still waiting with nothing to
// wait for) refuses with SQLSTATE ABC01 and writes nothing: the core then
// decides in a transaction, move by move, as before.
const DECIDE_CALL = `create function "abc_decide_call"(p jsonb, p_origin text) returns jsonb language plpgsql as $fn$
declare
  c jsonb := p->'call';
  v_approval approvals;
  v_call tool_calls;
  v_run runs;
  v_ac record;
  v_cc record;
  v_resume boolean := false;
begin
  update approvals a set status = p->>'to', decided_at = now(), decided_by = p->>'decided_by', reason = p->>'reason', version = a.version + 1
  where a.approval_id = p->>'approval_id' and a.status = p->>'from'
  returning * into v_approval;
  if not found then
    raise exception using errcode = 'ABC01', message = 'abc_decide_call: the approval is not ' || (p->>'from');
  end if;
  update tool_calls t set status = c->>'to', version = t.version + 1, error = coalesce(c->'error', t.error),
    completed_at = case when (c->>'completed')::boolean then now() else t.completed_at end
  where t.tool_call_id = v_approval.tool_call_id and t.status = c->>'from' and coalesce(t.args, '{}') = c->'args'
  returning * into v_call;
  if not found then
    raise exception using errcode = 'ABC01', message = 'abc_decide_call: the call is not ' || (c->>'from') || ' with the arguments shown';
  end if;
  select * into v_run from runs r where r.run_id = v_approval.run_id for update;
  if not found or v_run.status <> p->>'run_status' or v_run.parent_run_id is not null then
    raise exception using errcode = 'ABC01', message = 'abc_decide_call: the run is not ' || (p->>'run_status');
  end if;
  select * into v_ac from abc_move_contract(
    (select e.execution_id from execution_contracts e where e.run_id = v_run.run_id and e.subject_id = v_approval.approval_id order by e.created_at desc limit 1),
    p->'approval_contract');
  select * into v_cc from abc_move_contract(
    (select e.execution_id from execution_contracts e where e.run_id = v_run.run_id and e.subject_id = v_call.tool_call_id order by e.created_at desc limit 1),
    p->'call_contract');
  if p ? 'resume' and not exists (
    select 1 from tool_calls t where t.run_id = v_run.run_id
      and (t.status = 'WAITING_APPROVAL' or (t.status = 'RUNNING' and t.kind in (select jsonb_array_elements_text(p->'resume'->'client_kinds'))))
  ) then
    if exists (select 1 from execution_contracts e where e.run_id = v_run.run_id and e.status = 'waiting') then
      raise exception using errcode = 'ABC01', message = 'abc_decide_call: a contract of the run still waits';
    end if;
    update runs r set status = p->'resume'->>'to', version = r.version + 1 where r.run_id = v_run.run_id;
    v_resume := true;
  end if;
  return jsonb_build_object('approval', to_jsonb(v_approval), 'call', to_jsonb(v_call)) || abc_append_run_events(v_run.run_id,
    abc_contract_events(p->'approval_events', v_ac.o_execution_id, v_ac.o_summary, v_ac.o_irreversible, v_ac.o_fact_error)
      || abc_contract_events(p->'events', v_cc.o_execution_id, v_cc.o_summary, v_cc.o_irreversible, v_cc.o_fact_error)
      || case when v_resume then p->'resume_events' else '[]'::jsonb end,
    p->>'channel', p_origin, 'execution_state');
end
$fn$`;

export class Migration20261129010000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(DECIDE_CALL);
  }

  override async down(): Promise<void> {
    this.addSql('drop function "abc_decide_call"(jsonb, text)');
  }
}
