import { Migration } from '@mikro-orm/migrations';
import { edit } from './Migration20261124150000_run_commit_events.js';
import { OPEN_TOOL_CALL_V2 } from './Migration20261125150000_tool_call_events.js';

// A call of a tool without side effects that ended before it was written
// (openAndEndCall) was opened to RUNNING and then moved to its end in the same
// statement: a second write of the call and its contract, a second append of
// events. abc_open_tool_call now also takes the end: the call with its result
// or error and completed_at, the contract with its outcome, its fact, and
// every hop's transition record and event, written once. Without an end it
// writes what it wrote before.
export const OPEN_TOOL_CALL_V3 = edit(
  OPEN_TOOL_CALL_V2,
  ['create function "abc_open_tool_call"(p jsonb, p_origin text)', 'create or replace function "abc_open_tool_call"(p jsonb, p_origin text)'],
  ['  v_events jsonb;', '  v_events jsonb;\n  v_fact_error text;'],
  [
    'timeout_ms, traceparent, version, started_at, deadline_at)',
    'timeout_ms, traceparent, version, started_at, deadline_at,\n                          result, error, completed_at)',
  ],
  [
    "now() + ((c->>'deadline_ms')::int * interval '1 millisecond'))",
    "now() + ((c->>'deadline_ms')::int * interval '1 millisecond'),\n          case when c ? 'result' then c->'result' end, c->'error', case when (c->>'completed')::boolean then now() end)",
  ],
  ['timeout_seconds, created_at, entered_at, version)', 'timeout_seconds, created_at, entered_at, version, result, error_message)'],
  ["1 + jsonb_array_length(k->'hops'));", "1 + jsonb_array_length(k->'hops'), k->>'result', k->>'error_message');"],
  [
    "  select jsonb_agg(to_jsonb(e) order by e.id) into v_events from abc_append_events(p->'events',",
    "  if (k->>'terminal')::boolean then\n    v_fact_error := abc_execution_fact(k->>'execution_id', k->>'fact_id');\n  end if;\n" +
      "  select jsonb_agg(to_jsonb(e) order by e.id) into v_events from abc_append_events(case when v_fact_error is null then p->'events'\n" +
      "    else abc_contract_events(p->'events', k->>'execution_id', k->>'action_summary', (k->>'irreversible')::boolean, v_fact_error) end,",
  ],
);

export class Migration20261127190000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(OPEN_TOOL_CALL_V3);
  }

  override async down(): Promise<void> {
    this.addSql(OPEN_TOOL_CALL_V2.replace('create function', 'create or replace function'));
  }
}
