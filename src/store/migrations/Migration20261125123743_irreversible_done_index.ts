import { Migration } from '@mikro-orm/migrations';

// Seed 004 resume alignment asks, on every tool call it opens (abc_open_tool_call)
// and before a call starts (completedElsewhere), whether an irreversible action
// with the same key completed in the session. On a young table, whose statistics
// cannot tell the key's index from the session's, PostgreSQL could plan that
// check through idx_execution_contracts_session and read every contract of the
// session per call. This index holds only completed irreversible contracts and
// matches the check's columns, so the check is one probe of a small index.
export class Migration20261125123743 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index "idx_execution_contracts_irreversible_done" on "execution_contracts" ("idempotency_key", "session_id") where status = 'completed' and irreversible`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index "idx_execution_contracts_irreversible_done"');
  }
}
