import { Migration } from '@mikro-orm/migrations';

// The observer's tool metrics read the calls since a time, and no index held
// created_at: each read scanned every call ever made (104-130 ms with 1,000,000).
// Calls are inserted in time order, so a BRIN index of block ranges finds the
// window's pages for a few kilobytes and almost no cost on an insert.
export class Migration20261127235000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('create index "idx_tool_calls_created" on "tool_calls" using brin ("created_at") with (pages_per_range = 32, autosummarize = on)');
  }

  override async down(): Promise<void> {
    this.addSql('drop index "idx_tool_calls_created"');
  }
}
