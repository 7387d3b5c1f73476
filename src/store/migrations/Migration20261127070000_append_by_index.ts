import { Migration } from '@mikro-orm/migrations';
import { APPEND_EVENTS_V2 } from './Migration20261125160000_announce_after_commit.js';
import { edit } from './Migration20261124150000_run_commit_events.js';

// abc_append_events finds its runs and sessions by their keys. The planner
// takes a jsonb_to_recordset for 100 rows, so it joined the runs and sessions
// tables by hashing them whole: a sequential scan of both on every append,
// until the tables grew past some 25,000 rows. `= any(array)` is looked up in
// the primary keys at any size. V2 with these lines changed.
export const APPEND_EVENTS_V3 = edit(
  APPEND_EVENTS_V2,
  ['$fn$\nbegin\n', "$fn$\ndeclare\n  v_runs text[] := array(select w->>'run_id' from jsonb_array_elements(p_wanted) w);\nbegin\n"],
  ['    where r.run_id = w.run_id and', '    where r.run_id = any(v_runs) and r.run_id = w.run_id and'],
  ['from per_session p where s.session_id = p.session_id', 'from per_session p\n    where s.session_id = any(array(select per_session.session_id from per_session)) and s.session_id = p.session_id'],
);

export class Migration20261127070000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(APPEND_EVENTS_V3);
  }

  override async down(): Promise<void> {
    this.addSql(APPEND_EVENTS_V2);
  }
}
