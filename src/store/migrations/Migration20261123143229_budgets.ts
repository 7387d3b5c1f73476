import { Migration } from '@mikro-orm/migrations';

export class Migration20261123143229 extends Migration {
  override async up(): Promise<void> {
    this.addSql("create table \"token_usage\" (\"tenant_id\" varchar(64) not null, \"day\" date not null, \"tokens\" bigint not null default '0', primary key (\"tenant_id\", \"day\"))");
    this.addSql("alter table \"runs\" add \"tokens_used\" int not null default 0");
  }

  override async down(): Promise<void> {
    this.addSql("drop table if exists \"token_usage\" cascade");
    this.addSql("alter table \"runs\" drop column \"tokens_used\"");
  }
}
