import { Migration } from '@mikro-orm/migrations';

// The timer sweeps look for open calls every second on every core: overdue
// ones, and ones whose executor died. idx_tool_calls_deadline held every call,
// and an ended call keeps its past deadline, so the overdue sweep walked all
// the ended calls and the orphan sweep read the whole table: 57 ms and 49 ms
// with 300,000 ended calls. idx_tool_calls_open holds only the calls in the
// states the sweeps read, which are few whatever the history.
export class Migration20261127230000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('drop index "idx_tool_calls_deadline"');
    this.addSql(`create index "idx_tool_calls_open" on "tool_calls" ("status", "deadline_at") where status in ('APPROVED', 'DISPATCHED', 'RUNNING')`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index "idx_tool_calls_open"');
    this.addSql('create index "idx_tool_calls_deadline" on "tool_calls" ("deadline_at")');
  }
}
