import { Migration } from '@mikro-orm/migrations';

export class Migration20261123200701 extends Migration {
  override async up(): Promise<void> {
    this.addSql("alter table \"agents\" add \"resumable\" boolean not null default false");
    this.addSql("alter table \"runs\" add \"traceparent\" varchar(55) null");
    this.addSql("alter table \"tickets\" add \"traceparent\" varchar(55) null");
    this.addSql("alter table \"tool_calls\" add \"traceparent\" varchar(55) null");
  }

  override async down(): Promise<void> {
    this.addSql("alter table \"agents\" drop column \"resumable\"");
    this.addSql("alter table \"runs\" drop column \"traceparent\"");
    this.addSql("alter table \"tickets\" drop column \"traceparent\"");
    this.addSql("alter table \"tool_calls\" drop column \"traceparent\"");
  }
}
