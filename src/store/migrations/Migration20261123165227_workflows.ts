import { Migration } from '@mikro-orm/migrations';

export class Migration20261123165227 extends Migration {
  override async up(): Promise<void> {
    this.addSql("create table \"phase_transitions\" (\"transition_id\" varchar(64) not null, \"session_id\" varchar(128) not null, \"tenant_id\" varchar(64) not null, \"workflow_id\" varchar(128) not null, \"workflow_version\" varchar(32) not null, \"from_phase\" varchar(64) not null, \"to_phase\" varchar(64) not null, \"trigger\" varchar(32) not null, \"actor\" varchar(128) not null, \"reason\" text not null, \"metadata\" jsonb not null default '{}', \"accepted\" boolean not null, \"run_id\" varchar(64) null, \"created_at\" timestamptz not null default now(), primary key (\"transition_id\"))");
    this.addSql("create index \"idx_phase_transitions_session\" on \"phase_transitions\" (\"session_id\")");
    this.addSql("create table \"workflows\" (\"tenant_id\" varchar(64) not null, \"workflow_id\" varchar(128) not null, \"version\" varchar(32) not null, \"definition\" jsonb not null, \"created_at\" timestamptz not null default now(), primary key (\"tenant_id\", \"workflow_id\", \"version\"))");
    this.addSql("create table \"workflow_sessions\" (\"session_id\" varchar(128) not null, \"tenant_id\" varchar(64) not null, \"workflow_id\" varchar(128) not null, \"workflow_version\" varchar(32) not null, \"phase\" varchar(64) not null, \"phase_turns\" jsonb not null default '{}', \"carryover\" text null, \"turn_run_id\" varchar(64) null, \"turn_carryover\" text null, \"created_at\" timestamptz not null default now(), \"updated_at\" timestamptz not null default now(), primary key (\"session_id\"))");
    this.addSql("create or replace function \"phase_transitions_phase_transitions_immutable_fn\"() returns trigger as $$ begin RAISE EXCEPTION 'phase transitions are immutable' USING ERRCODE = 'check_violation'; end; $$ language plpgsql");
    this.addSql("create trigger \"phase_transitions_immutable\" BEFORE UPDATE OR DELETE on \"phase_transitions\" for each ROW execute function \"phase_transitions_phase_transitions_immutable_fn\"()");
    this.addSql("create or replace function \"workflows_workflows_immutable_fn\"() returns trigger as $$ begin RAISE EXCEPTION 'workflow versions are immutable' USING ERRCODE = 'check_violation'; end; $$ language plpgsql");
    this.addSql("create trigger \"workflows_immutable\" BEFORE UPDATE OR DELETE on \"workflows\" for each ROW execute function \"workflows_workflows_immutable_fn\"()");
  }

  override async down(): Promise<void> {
    this.addSql("drop trigger if exists \"phase_transitions_immutable\" on \"phase_transitions\"");
    this.addSql("drop function if exists \"phase_transitions_phase_transitions_immutable_fn\"()");
    this.addSql("drop table if exists \"phase_transitions\" cascade");
    this.addSql("drop trigger if exists \"workflows_immutable\" on \"workflows\"");
    this.addSql("drop function if exists \"workflows_workflows_immutable_fn\"()");
    this.addSql("drop table if exists \"workflows\" cascade");
    this.addSql("drop table if exists \"workflow_sessions\" cascade");
  }
}
