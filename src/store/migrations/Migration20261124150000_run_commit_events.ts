import { Migration } from '@mikro-orm/migrations';
import { COMPLETE_RUN_V1, START_RUN_V1 } from './Migration20261124110000_run_commit_functions.js';

// abc_start_run and abc_complete_run (migration run_commit_functions) also
// return the events they appended, and name the core that wrote them in the
// notification (p->>'origin'): that core hands the events to its own watchers,
// as the event appender does, and they need not read them back. Both results
// only gain a key; a call without an origin notifies as before. Each is its
// first definition with these lines changed.
const APPEND = "abc_append_events(p->'events', p->'wanted', p->>'channel', '')";
const APPENDED = "select jsonb_agg(to_jsonb(e) order by e.id) into v_events from abc_append_events(p->'events', p->'wanted', p->>'channel', coalesce(p->>'origin', '')) e;";

export const START_RUN_V2 = edit(
  START_RUN_V1,
  ['  v_first bigint;', '  v_events jsonb;'],
  [`  select min(e.id) into v_first from ${APPEND} e;`, `  ${APPENDED}`],
  [`'first_id', v_first::text);`, `'first_id', (v_events->0->>'id'), 'events', coalesce(v_events, '[]'));`],
);

export const COMPLETE_RUN_V2 = edit(
  COMPLETE_RUN_V1,
  ['  v_run runs;', '  v_run runs;\n  v_events jsonb;'],
  [`  perform 1 from ${APPEND};`, `  ${APPENDED}`],
  ['  return to_jsonb(v_run);', "  return to_jsonb(v_run) || jsonb_build_object('appended', coalesce(v_events, '[]'));"],
);

/** `sql` with each `[from, to]` replaced, each `from` found exactly once (migration tool_call_events uses it too). */
export function edit(sql: string, ...changes: [string, string][]): string {
  for (const [from, to] of changes) {
    if (sql.split(from).length !== 2) throw new Error(`migration run_commit_events: "${from}" is not in the definition once`);
    sql = sql.replace(from, () => to);
  }
  return sql;
}

export class Migration20261124150000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(START_RUN_V2);
    this.addSql(COMPLETE_RUN_V2);
  }

  override async down(): Promise<void> {
    this.addSql(START_RUN_V1);
    this.addSql(COMPLETE_RUN_V1);
  }
}
