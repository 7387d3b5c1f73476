import { Migration } from '@mikro-orm/migrations';

// GET /v1/approvals lists a page at a time, oldest first, after a cursor of
// (created_at, approval_id). A tenant's inbox and a session's approvals read
// their page from these indexes instead of sorting every approval they hold.
export class Migration20261127233000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('create index "idx_approvals_tenant_created" on "approvals" ("tenant_id", "created_at", "approval_id")');
    this.addSql('create index "idx_approvals_session_created" on "approvals" ("session_id", "created_at", "approval_id")');
  }

  override async down(): Promise<void> {
    this.addSql('drop index "idx_approvals_session_created"');
    this.addSql('drop index "idx_approvals_tenant_created"');
  }
}
