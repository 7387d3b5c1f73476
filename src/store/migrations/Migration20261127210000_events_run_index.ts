import { Migration } from '@mikro-orm/migrations';

// Every event wrote an entry into idx_events_run (run_id, ts), and no read
// needs it: the reads of a run's events filter by run_id, which the unique
// (run_id, seq) index serves, and order by id or seq; the observer's `after_ts`
// filters the rows it reads. Five indexes per event become four, on the path
// of every delta, tool call and run move.
export class Migration20261127210000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('drop index "idx_events_run"');
  }

  override async down(): Promise<void> {
    this.addSql('create index "idx_events_run" on "events" ("run_id", "ts")');
  }
}
