import { Migration } from '@mikro-orm/migrations';

export class Migration20261122070906 extends Migration {
  override async up(): Promise<void> {
    this.addSql("create table \"contract_steps\" (\"ticket\" varchar(64) not null, \"step_id\" varchar(64) not null, \"position\" int not null, \"label\" varchar(256) not null, \"capability\" varchar(128) not null, \"status\" varchar(16) not null, \"output\" jsonb null, \"message\" text null, \"started_at\" timestamptz null, \"ended_at\" timestamptz null, primary key (\"ticket\", \"step_id\"))");
    this.addSql("create table \"ticket_events\" (\"id\" bigserial primary key, \"ticket\" varchar(64) not null, \"seq\" int not null, \"ts\" bigint not null, \"type\" varchar(64) not null, \"payload\" jsonb null)");
    this.addSql("alter table \"ticket_events\" add constraint \"uq_ticket_events_seq\" unique (\"ticket\", \"seq\")");
    this.addSql("create or replace function \"assemblies_assemblies_immutable_fn\"() returns trigger as $$ begin RAISE EXCEPTION 'assembly versions are immutable' USING ERRCODE = 'check_violation'; end; $$ language plpgsql");
    this.addSql("create trigger \"assemblies_immutable\" BEFORE UPDATE on \"assemblies\" for each ROW execute function \"assemblies_assemblies_immutable_fn\"()");
    this.addSql("alter table \"contract_executions\" add \"request_hash\" varchar(64) not null default '', add \"assembly_id\" varchar(128) null, add \"assembly_version\" varchar(32) null, add \"expected_latency_ms\" int not null default 0, add \"artifact\" text null, add \"artifact_media_type\" varchar(64) null, add \"warnings\" jsonb null, add \"lease_owner\" varchar(64) null, add \"lease_expires_at\" timestamptz null, add \"started_at\" timestamptz null, add \"finished_at\" timestamptz null");
    this.addSql("create index \"idx_contract_executions_lease\" on \"contract_executions\" (\"lease_expires_at\")");
    this.addSql("alter table \"contract_executions\" add constraint \"uq_contract_executions_idempotency\" unique (\"contract_id\", \"idempotency_key\")");
    this.addSql("create index \"idx_execution_contracts_subject\" on \"execution_contracts\" (\"ticket\", \"subject_id\")");
    this.addSql("create index \"idx_execution_contracts_idempotency\" on \"execution_contracts\" (\"idempotency_key\")");
    this.addSql("create or replace function \"frozen_plans_frozen_plans_immutable_fn\"() returns trigger as $$ begin RAISE EXCEPTION 'frozen plans are immutable' USING ERRCODE = 'check_violation'; end; $$ language plpgsql");
    this.addSql("create trigger \"frozen_plans_immutable\" BEFORE UPDATE OR DELETE on \"frozen_plans\" for each ROW execute function \"frozen_plans_frozen_plans_immutable_fn\"()");
    // json keeps the caller-facing documents in the order they were built (the schema diff treats json and jsonb alike).
    this.addSql("alter table \"contract_executions\" alter column \"partial_result\" type json using \"partial_result\"::json, alter column \"result\" type json using \"result\"::json, alter column \"error\" type json using \"error\"::json");
    // Progress is derived when a ticket is read; these foundation columns were never written.
    this.addSql("alter table \"contract_executions\" drop column \"percent\", drop column \"current_step\", drop column \"steps\"");
  }

  override async down(): Promise<void> {
    this.addSql("alter table \"contract_executions\" add \"percent\" int not null default 0, add \"current_step\" varchar(128) null, add \"steps\" jsonb null");
    this.addSql("alter table \"contract_executions\" alter column \"partial_result\" type jsonb using \"partial_result\"::jsonb, alter column \"result\" type jsonb using \"result\"::jsonb, alter column \"error\" type jsonb using \"error\"::jsonb");
    this.addSql("drop table if exists \"contract_steps\" cascade");
    this.addSql("drop table if exists \"ticket_events\" cascade");
    this.addSql("drop trigger if exists \"assemblies_immutable\" on \"assemblies\"");
    this.addSql("drop function if exists \"assemblies_assemblies_immutable_fn\"()");
    this.addSql("drop index \"idx_contract_executions_lease\"");
    this.addSql("alter table \"contract_executions\" drop constraint \"uq_contract_executions_idempotency\"");
    this.addSql("alter table \"contract_executions\" drop column \"request_hash\", drop column \"assembly_id\", drop column \"assembly_version\", drop column \"expected_latency_ms\", drop column \"artifact\", drop column \"artifact_media_type\", drop column \"warnings\", drop column \"lease_owner\", drop column \"lease_expires_at\", drop column \"started_at\", drop column \"finished_at\"");
    this.addSql("drop index \"idx_execution_contracts_subject\"");
    this.addSql("drop index \"idx_execution_contracts_idempotency\"");
    this.addSql("drop trigger if exists \"frozen_plans_immutable\" on \"frozen_plans\"");
    this.addSql("drop function if exists \"frozen_plans_frozen_plans_immutable_fn\"()");
  }
}
