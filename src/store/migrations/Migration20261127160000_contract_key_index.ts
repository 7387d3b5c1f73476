import { Migration } from '@mikro-orm/migrations';

// Seed 004 resume alignment looks for a completed irreversible action by key
// and session. Its partial index named `status` in its predicate, and a move
// changes `status`: no move of a contract could be a HOT update, so each wrote
// a new entry into all six of the table's indexes. The index now holds the
// irreversible contracts (a column that never changes), and the check filters
// the few rows it finds by status. It stays small, so the planner still prefers
// it to the session's index while the table is young. Nothing looks contracts
// up by key alone: the key's own index goes.
export class Migration20261127160000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('create index "idx_execution_contracts_irreversible_key" on "execution_contracts" ("idempotency_key", "session_id") where irreversible');
    this.addSql('drop index "idx_execution_contracts_irreversible_done"');
    this.addSql('drop index "idx_execution_contracts_idempotency"');
  }

  override async down(): Promise<void> {
    this.addSql('create index "idx_execution_contracts_idempotency" on "execution_contracts" ("idempotency_key")');
    this.addSql(`create index "idx_execution_contracts_irreversible_done" on "execution_contracts" ("idempotency_key", "session_id") where status = 'completed' and irreversible`);
    this.addSql('drop index "idx_execution_contracts_irreversible_key"');
  }
}
