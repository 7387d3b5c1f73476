import { Migration } from '@mikro-orm/migrations';

export class Migration20261123144057 extends Migration {
  override async up(): Promise<void> {
    this.addSql("create table \"secrets\" (\"tenant_id\" varchar(64) not null, \"name\" varchar(128) not null, \"version\" int not null, \"sealed\" text not null, \"created_at\" timestamptz not null default now(), \"retires_at\" timestamptz null, primary key (\"tenant_id\", \"name\", \"version\"))");
    this.addSql("create table \"token_usage\" (\"tenant_id\" varchar(64) not null, \"day\" date not null, \"tokens\" bigint not null default '0', primary key (\"tenant_id\", \"day\"))");
    this.addSql("alter table \"runs\" add \"tokens_used\" int not null default 0");
    this.addSql("alter table \"approvals\" add \"ticket\" varchar(64) null, add \"step_id\" varchar(64) null, add \"capability\" varchar(128) null, add \"tenant_id\" varchar(64) not null default 'default'");
    // Approvals made before tenants are the default tenant's; every new one names its tenant.
    this.addSql("update \"approvals\" a set \"tenant_id\" = r.\"tenant_id\" from \"runs\" r where r.\"run_id\" = a.\"run_id\"");
    this.addSql("alter table \"approvals\" alter column \"tenant_id\" drop default");
    this.addSql("alter table \"approvals\" alter column \"run_id\" drop not null");
    this.addSql("alter table \"approvals\" alter column \"tool_call_id\" drop not null");
    this.addSql("create index \"idx_approvals_ticket\" on \"approvals\" (\"ticket\")");
  }

  override async down(): Promise<void> {
    this.addSql("drop table if exists \"secrets\" cascade");
    this.addSql("drop table if exists \"token_usage\" cascade");
    this.addSql("drop index \"idx_approvals_ticket\"");
    this.addSql("alter table \"approvals\" drop column \"ticket\", drop column \"step_id\", drop column \"capability\", drop column \"tenant_id\"");
    this.addSql("alter table \"approvals\" alter column \"run_id\" set not null");
    this.addSql("alter table \"approvals\" alter column \"tool_call_id\" set not null");
    this.addSql("alter table \"runs\" drop column \"tokens_used\"");
  }
}
