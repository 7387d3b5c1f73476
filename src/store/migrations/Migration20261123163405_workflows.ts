import { Migration } from '@mikro-orm/migrations';

export class Migration20261123163405 extends Migration {
  override async up(): Promise<void> {
    this.addSql("create table \"workflows\" (\"tenant_id\" varchar(64) not null, \"workflow_id\" varchar(128) not null, \"version\" varchar(32) not null, \"definition\" jsonb not null, \"created_at\" timestamptz not null default now(), primary key (\"tenant_id\", \"workflow_id\", \"version\"))");
    this.addSql("create or replace function \"workflows_workflows_immutable_fn\"() returns trigger as $$ begin RAISE EXCEPTION 'workflow versions are immutable' USING ERRCODE = 'check_violation'; end; $$ language plpgsql");
    this.addSql("create trigger \"workflows_immutable\" BEFORE UPDATE OR DELETE on \"workflows\" for each ROW execute function \"workflows_workflows_immutable_fn\"()");
  }

  override async down(): Promise<void> {
    this.addSql("drop trigger if exists \"workflows_immutable\" on \"workflows\"");
    this.addSql("drop function if exists \"workflows_workflows_immutable_fn\"()");
    this.addSql("drop table if exists \"workflows\" cascade");
  }
}
