import { Migration } from '@mikro-orm/migrations';

export class Migration20261123220802 extends Migration {
  override async up(): Promise<void> {
    this.addSql("alter table \"sessions\" add \"event_head\" bigint not null default '0'");
    this.addSql("alter table \"events\" add \"session_seq\" bigint null");
  }

  override async down(): Promise<void> {
    this.addSql("alter table \"events\" drop column \"session_seq\"");
    this.addSql("alter table \"sessions\" drop column \"event_head\"");
  }
}
