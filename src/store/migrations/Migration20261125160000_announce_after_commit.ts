import { Migration } from '@mikro-orm/migrations';
import { APPEND_EVENTS_V1 } from './Migration20261124030000_append_function.js';
import { COMMIT_STEP_V3 } from './Migration20261124140000_step_records_function.js';
import { edit } from './Migration20261124150000_run_commit_events.js';

// An append or a step commit without a channel notifies no one: its writer
// announces the commit after it (store/notifier.ts), so the commit holds no
// NOTIFY lock. Before, no channel was an error; every call with one is as it was.
export const APPEND_EVENTS_V2 = edit(APPEND_EVENTS_V1, ['    from added group by', '    from added where p_channel is not null group by']);
const COMMIT_STEP_V4 = edit(COMMIT_STEP_V3, ["  perform pg_notify(p->>'channel', p->>'ticket');", "  perform pg_notify(p->>'channel', p->>'ticket') where p->>'channel' is not null;"]);

export class Migration20261125160000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(APPEND_EVENTS_V2);
    this.addSql(COMMIT_STEP_V4);
  }

  override async down(): Promise<void> {
    this.addSql(APPEND_EVENTS_V1);
    this.addSql(COMMIT_STEP_V3);
  }
}
