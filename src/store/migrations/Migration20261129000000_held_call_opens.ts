import { Migration } from '@mikro-orm/migrations';
import { edit } from './Migration20261124150000_run_commit_events.js';
import { OPEN_TOOL_CALL_V4 } from './Migration20261128060000_numbered_call_events.js';

// A call that policy holds for approval was opened in a transaction of twelve
// statements: the key's claim, the call and its contract, two moves of each,
// the approval and its contract, the run's pause and the events. Given
// `approval` (with `numbered`), abc_open_tool_call now writes it all: the call
// opened through its hops to WAITING_APPROVAL with the approval's id, the
// approval, its contract (pending through running to waiting, a transition
// record per hop), and the pause of the run from the state the core expects.
// A run in another state (already paused for another call's approval) only
// records the approval: the last event sent, the pause's, is not appended.
export const OPEN_TOOL_CALL_V5 = edit(
  OPEN_TOOL_CALL_V4,
  ['  v_fact_error text;\n', "  v_fact_error text;\n  a jsonb := p->'approval';\n  v_input jsonb := p->'events';\n"],
  ['                          result, error, completed_at)', '                          result, error, completed_at, approval_id)'],
  ["case when (c->>'completed')::boolean then now() end)\n", "case when (c->>'completed')::boolean then now() end, a->>'approval_id')\n"],
  [
    "  if (p->>'numbered')::boolean then\n    return to_jsonb(v_call) || abc_append_run_events(v_run.run_id, case when v_fact_error is null then p->'events'\n" +
      "      else abc_contract_events(p->'events',",
    '  if a is not null then\n' +
      '    insert into approvals (approval_id, run_id, tool_call_id, status, expires_at, session_id, tenant_id, args_summary, args_hash)\n' +
      "    values (a->>'approval_id', v_run.run_id, c->>'tool_call_id', 'PENDING', (a->>'expires_at')::timestamptz, v_run.session_id, v_run.tenant_id,\n" +
      "            a->>'args_summary', a->>'args_hash');\n" +
      '    insert into execution_contracts (execution_id, tenant_id, session_id, run_id, subject_id, action_type, action_summary, status, irreversible,\n' +
      '                                     timeout_seconds, created_at, entered_at, version)\n' +
      "    values (a->'contract'->>'execution_id', v_run.tenant_id, v_run.session_id, v_run.run_id, a->>'approval_id', 'ecs_request', a->'contract'->>'action_summary',\n" +
      "            a->'contract'->>'status', false, (a->'contract'->>'timeout_seconds')::int, (a->'contract'->>'created_at')::timestamptz,\n" +
      "            (a->'contract'->>'at')::timestamptz, 1 + jsonb_array_length(a->'contract'->'hops'));\n" +
      '    insert into execution_transitions (execution_id, sequence_number, from_status, to_status, trigger, actor, actor_category, ts)\n' +
      "    select a->'contract'->>'execution_id', h.n - 1, h.from_status, h.to_status, h.trigger, h.actor, h.actor_category, h.ts\n" +
      "    from jsonb_to_recordset(a->'contract'->'hops') as h(n int, from_status text, to_status text, trigger text, actor text, actor_category text, ts timestamptz);\n" +
      "    update runs r set status = a->'pause'->>'to', version = r.version + 1 where r.run_id = v_run.run_id and r.status = a->'pause'->>'from';\n" +
      '    if not found then\n' +
      '      v_input := v_input - (jsonb_array_length(v_input) - 1);\n' +
      '    end if;\n' +
      '  end if;\n' +
      "  if (p->>'numbered')::boolean then\n    return to_jsonb(v_call) || abc_append_run_events(v_run.run_id, case when v_fact_error is null then v_input\n" +
      '      else abc_contract_events(v_input,',
  ],
);

export class Migration20261129000000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(OPEN_TOOL_CALL_V5);
  }

  override async down(): Promise<void> {
    this.addSql(OPEN_TOOL_CALL_V4);
  }
}
