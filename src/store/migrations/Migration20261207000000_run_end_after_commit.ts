import { Migration } from '@mikro-orm/migrations';
import { edit } from './Migration20261124150000_run_commit_events.js';
import { COMPLETE_RUN_V3 } from './Migration20261128090000_numbered_run_events.js';

// abc_complete_run sent the run-ended NOTIFY in its commit. PostgreSQL holds
// one lock from a notifying commit until its WAL flush ends, so the
// completions of concurrent runs went one flush at a time. Called without an
// ended_channel (a core that announces the run's end after the commit, as it
// announces its events), it notifies no one. V3 with this line changed.
export const COMPLETE_RUN_V4 = edit(COMPLETE_RUN_V3, [
  "  perform pg_notify(p->>'ended_channel', v_run.run_id);\n",
  "  if p->>'ended_channel' is not null then\n    perform pg_notify(p->>'ended_channel', v_run.run_id);\n  end if;\n",
]);

export class Migration20261207000000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(COMPLETE_RUN_V4);
  }

  override async down(): Promise<void> {
    this.addSql(COMPLETE_RUN_V3);
  }
}
