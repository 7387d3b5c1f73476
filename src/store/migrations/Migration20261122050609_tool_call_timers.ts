import { Migration } from '@mikro-orm/migrations';

export class Migration20261122050609 extends Migration {
  override async up(): Promise<void> {
    this.addSql("alter table \"tool_calls\" add \"timeout_ms\" int null");
    this.addSql("alter table \"approvals\" add \"args_hash\" varchar(64) null");
  }

  override async down(): Promise<void> {
    this.addSql("alter table \"approvals\" drop column \"args_hash\"");
    this.addSql("alter table \"tool_calls\" drop column \"timeout_ms\"");
  }
}
