import { Migration } from '@mikro-orm/migrations';
import { edit } from './Migration20261124150000_run_commit_events.js';
import { MOVE_TOOL_CALL_V1, OPEN_TOOL_CALL_V1 } from './Migration20261124100000_tool_call_commit_functions.js';

// A tool call's two commits (migration tool_call_commit_functions) answer with
// the events they appended and name the core that wrote them in the
// notification: that core hands the events to its own watchers, as run starts
// and ends do (migration run_commit_events), and they need not read them back.
// The answer is the call as jsonb with `appended`, or null when nothing was
// written; a new type of answer is a new function, so each takes the origin as
// a second argument. The one-argument functions stay for cores of the previous
// version, as wrappers that notify with no origin, as before.
export const OPEN_TOOL_CALL_V2 = edit(
  OPEN_TOOL_CALL_V1,
  ['create or replace function "abc_open_tool_call"(p jsonb) returns setof "tool_calls"', 'create function "abc_open_tool_call"(p jsonb, p_origin text) returns jsonb'],
  ['  k jsonb := p->\'contract\';', '  k jsonb := p->\'contract\';\n  v_events jsonb;'],
  ['    return; -- a live claim', '    return null; -- a live claim'],
  [
    "  perform 1 from abc_append_events(p->'events', p->'wanted', p->>'channel', '');\n  return next v_call;",
    "  select jsonb_agg(to_jsonb(e) order by e.id) into v_events from abc_append_events(p->'events', p->'wanted', p->>'channel', p_origin) e;\n  return to_jsonb(v_call) || jsonb_build_object('appended', coalesce(v_events, '[]'));",
  ],
);

export const MOVE_TOOL_CALL_V2 = edit(
  MOVE_TOOL_CALL_V1,
  ['create or replace function "abc_move_tool_call"(p jsonb) returns setof "tool_calls"', 'create function "abc_move_tool_call"(p jsonb, p_origin text) returns jsonb'],
  ['  v_contract record;', '  v_contract record;\n  v_events jsonb;'],
  ['  perform 1 from abc_append_events(', '  select jsonb_agg(to_jsonb(e) order by e.id) into v_events from abc_append_events('],
  [
    "p->'wanted', p->>'channel', '');\n  return next v_call;",
    "p->'wanted', p->>'channel', p_origin) e;\n  return to_jsonb(v_call) || jsonb_build_object('appended', coalesce(v_events, '[]'));",
  ],
);

/** The one-argument function `name` as a wrapper of the two-argument one, with no origin. */
const wrapper = (name: string) => `create or replace function "${name}"(p jsonb) returns setof "tool_calls" language sql as $fn$
  select r.* from ${name}(p, '') j, jsonb_populate_record(null::tool_calls, j) r where j is not null
$fn$`;

export class Migration20261125150000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(OPEN_TOOL_CALL_V2);
    this.addSql(MOVE_TOOL_CALL_V2);
    this.addSql(wrapper('abc_open_tool_call'));
    this.addSql(wrapper('abc_move_tool_call'));
  }

  override async down(): Promise<void> {
    this.addSql(OPEN_TOOL_CALL_V1);
    this.addSql(MOVE_TOOL_CALL_V1);
    this.addSql('drop function if exists "abc_open_tool_call"(jsonb, text)');
    this.addSql('drop function if exists "abc_move_tool_call"(jsonb, text)');
  }
}
