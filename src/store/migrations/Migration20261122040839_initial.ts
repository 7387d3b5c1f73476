import { Migration } from '@mikro-orm/migrations';

export class Migration20261122040839 extends Migration {
  override async up(): Promise<void> {
    this.addSql("create table \"agents\" (\"agent_id\" varchar(64) not null, \"name\" varchar(256) not null, \"endpoint\" varchar(512) not null, \"capabilities\" jsonb null, \"status\" varchar(32) not null default 'healthy', \"last_heartbeat\" timestamptz null, \"created_at\" timestamptz not null default now(), \"auth_type\" varchar(32) null, \"auth_token\" text null, \"status_reason\" text null, \"metadata\" jsonb null, \"next_check_at\" timestamptz not null default now(), primary key (\"agent_id\"))");
    this.addSql("create index \"idx_agents_next_check\" on \"agents\" (\"next_check_at\")");
    this.addSql("create table \"api_keys\" (\"key_id\" varchar(64) not null, \"name\" varchar(128) not null, \"key_hash\" varchar(64) not null, \"prefix\" varchar(16) not null, \"created_at\" timestamptz not null default now(), \"last_used_at\" timestamptz null, \"revoked_at\" timestamptz null, primary key (\"key_id\"))");
    this.addSql("alter table \"api_keys\" add constraint \"api_keys_key_hash_unique\" unique (\"key_hash\")");
    this.addSql("create table \"assemblies\" (\"assembly_id\" varchar(128) not null, \"version\" varchar(32) not null, \"intent\" varchar(128) not null, \"contract_id\" varchar(256) null, \"definition\" jsonb not null, \"expected_latency_ms\" int not null default 0, \"created_at\" timestamptz not null default now(), primary key (\"assembly_id\", \"version\"))");
    this.addSql("create index \"idx_assemblies_intent\" on \"assemblies\" (\"intent\")");
    this.addSql("create table \"context_blobs\" (\"context_key\" varchar(128) not null, \"owner_type\" varchar(32) not null, \"owner_id\" varchar(64) not null, \"version\" int not null default 1, \"data\" jsonb null, \"created_at\" timestamptz not null default now(), \"updated_at\" timestamptz not null default now(), primary key (\"context_key\"))");
    this.addSql("create index \"idx_context_blobs_owner\" on \"context_blobs\" (\"owner_type\", \"owner_id\")");
    this.addSql("create table \"context_blob_versions\" (\"context_key\" varchar(128) not null, \"version\" int not null, \"data\" jsonb null, \"created_at\" timestamptz not null default now(), primary key (\"context_key\", \"version\"))");
    this.addSql("create table \"contract_executions\" (\"ticket\" varchar(64) not null, \"contract_id\" varchar(256) not null, \"contract_version\" varchar(32) not null, \"request_id\" varchar(128) not null, \"session_id\" varchar(128) not null, \"idempotency_key\" varchar(256) not null, \"request\" jsonb not null, \"mode\" varchar(8) not null, \"status\" varchar(16) not null, \"phase\" varchar(32) not null, \"lifecycle_state\" varchar(32) not null default 'INIT', \"percent\" int not null default 0, \"current_step\" varchar(128) null, \"steps\" jsonb null, \"plan_id\" varchar(64) null, \"partial_result\" jsonb null, \"result\" jsonb null, \"error\" jsonb null, \"next_ticket\" varchar(64) null, \"trace_id\" varchar(32) not null, \"created_at\" timestamptz not null default now(), \"updated_at\" timestamptz not null default now(), \"expires_at\" timestamptz not null, \"version\" int not null default 1, primary key (\"ticket\"))");
    this.addSql("create index \"idx_contract_executions_expiry\" on \"contract_executions\" (\"status\", \"expires_at\")");
    this.addSql("create table \"execution_contracts\" (\"execution_id\" varchar(64) not null, \"session_id\" varchar(128) not null, \"run_id\" varchar(64) null, \"ticket\" varchar(64) null, \"subject_id\" varchar(64) null, \"action_type\" varchar(32) not null, \"action_summary\" text not null, \"status\" varchar(16) not null, \"irreversible\" boolean not null default false, \"idempotency_key\" varchar(256) null, \"timeout_seconds\" int null, \"result\" text null, \"error_message\" text null, \"created_at\" timestamptz not null default now(), \"entered_at\" timestamptz not null default now(), \"version\" int not null default 1, primary key (\"execution_id\"))");
    this.addSql("create index \"idx_execution_contracts_session\" on \"execution_contracts\" (\"session_id\", \"created_at\")");
    this.addSql("create index \"idx_execution_contracts_run\" on \"execution_contracts\" (\"run_id\")");
    this.addSql("create table \"execution_transitions\" (\"id\" bigserial primary key, \"execution_id\" varchar(64) not null, \"sequence_number\" int not null, \"from_status\" varchar(16) not null, \"to_status\" varchar(16) not null, \"trigger\" varchar(32) not null, \"actor\" varchar(64) not null, \"actor_category\" varchar(16) not null, \"ts\" timestamptz not null default now())");
    this.addSql("alter table \"execution_transitions\" add constraint \"uq_execution_transitions_seq\" unique (\"execution_id\", \"sequence_number\")");
    this.addSql("create table \"frozen_plans\" (\"plan_id\" varchar(64) not null, \"ticket\" varchar(64) null, \"assembly_id\" varchar(128) not null, \"assembly_version\" varchar(32) not null, \"plan_hash\" varchar(64) not null, \"plan\" jsonb not null, \"replaces_plan_id\" varchar(64) null, \"created_at\" timestamptz not null default now(), primary key (\"plan_id\"))");
    this.addSql("create index \"idx_frozen_plans_ticket\" on \"frozen_plans\" (\"ticket\")");
    this.addSql("create table \"idempotency_keys\" (\"scope\" varchar(64) not null, \"key\" varchar(256) not null, \"request_hash\" varchar(64) not null, \"response\" jsonb null, \"created_at\" timestamptz not null default now(), \"expires_at\" timestamptz not null, primary key (\"scope\", \"key\"))");
    this.addSql("create index \"idx_idempotency_keys_expiry\" on \"idempotency_keys\" (\"expires_at\")");
    this.addSql("create table \"memory\" (\"memory_id\" varchar(64) not null, \"scope\" varchar(16) not null, \"scope_id\" varchar(128) not null, \"key\" varchar(256) not null, \"value\" jsonb not null, \"tags\" jsonb null, \"created_at\" timestamptz not null default now(), primary key (\"memory_id\"))");
    this.addSql("create index \"idx_memory_scope_key\" on \"memory\" (\"scope\", \"scope_id\", \"key\")");
    this.addSql("create table \"policies\" (\"policy_id\" varchar(64) not null, \"version\" int not null, \"document\" jsonb not null, \"active\" boolean not null default false, \"created_at\" timestamptz not null default now(), primary key (\"policy_id\"))");
    this.addSql("create table \"sessions\" (\"session_id\" varchar(64) not null, \"user_id\" varchar(64) not null, \"created_at\" timestamptz not null default now(), \"metadata\" jsonb null, primary key (\"session_id\"))");
    this.addSql("create table \"runs\" (\"run_id\" varchar(64) not null, \"session_id\" varchar(64) not null, \"root_agent_id\" varchar(64) not null, \"parent_run_id\" varchar(64) null, \"status\" varchar(32) not null, \"started_at\" timestamptz not null default now(), \"ended_at\" timestamptz null, \"error\" jsonb null, \"request_id\" varchar(128) null, \"trace_id\" varchar(32) not null, \"token_hash\" varchar(64) null, \"user_id\" varchar(64) null, \"last_seq\" int not null default 0, \"version\" int not null default 1, primary key (\"run_id\"))");
    this.addSql("create index \"idx_runs_parent\" on \"runs\" (\"parent_run_id\")");
    this.addSql("create index \"idx_runs_session\" on \"runs\" (\"session_id\", \"started_at\")");
    this.addSql("alter table \"runs\" add constraint \"uq_runs_session_request\" unique (\"session_id\", \"request_id\")");
    this.addSql("create table \"events\" (\"id\" bigserial primary key, \"event_id\" varchar(64) not null, \"run_id\" varchar(64) not null, \"session_id\" varchar(64) not null, \"seq\" int not null, \"ts\" bigint not null, \"type\" varchar(64) not null, \"payload\" jsonb null)");
    this.addSql("alter table \"events\" add constraint \"events_event_id_unique\" unique (\"event_id\")");
    this.addSql("create index \"idx_events_run\" on \"events\" (\"run_id\", \"ts\")");
    this.addSql("create index \"idx_events_session\" on \"events\" (\"session_id\", \"id\")");
    this.addSql("alter table \"events\" add constraint \"uq_events_run_seq\" unique (\"run_id\", \"seq\")");
    this.addSql("create table \"messages\" (\"message_id\" varchar(64) not null, \"session_id\" varchar(64) not null, \"run_id\" varchar(64) null, \"role\" varchar(16) not null, \"content\" text not null, \"created_at\" timestamptz not null default now(), \"metadata\" jsonb null, primary key (\"message_id\"))");
    this.addSql("create index \"idx_messages_session\" on \"messages\" (\"session_id\", \"created_at\")");
    this.addSql("create table \"snapshots\" (\"snapshot_id\" varchar(64) not null, \"ticket\" varchar(64) not null, \"lifecycle_state\" varchar(32) not null, \"context\" jsonb not null, \"created_at\" timestamptz not null default now(), primary key (\"snapshot_id\"))");
    this.addSql("create index \"idx_snapshots_ticket\" on \"snapshots\" (\"ticket\")");
    this.addSql("create table \"tools\" (\"tool_name\" varchar(128) not null, \"kind\" varchar(16) not null, \"policy\" jsonb null, \"timeout_ms\" int not null default 60000, \"metadata\" jsonb null, \"version\" varchar(32) not null default '1.0.0', \"description\" text null, \"input_schema\" jsonb null, \"output_schema\" jsonb null, \"permission_level\" varchar(16) not null default 'PUBLIC', \"side_effect\" boolean not null default false, \"endpoint\" varchar(512) null, \"created_at\" timestamptz not null default now(), primary key (\"tool_name\"))");
    this.addSql("create table \"tool_calls\" (\"tool_call_id\" varchar(64) not null, \"run_id\" varchar(64) not null, \"tool_name\" varchar(128) not null, \"kind\" varchar(16) not null, \"status\" varchar(32) not null, \"args\" jsonb null, \"result\" jsonb null, \"error\" jsonb null, \"approval_id\" varchar(64) null, \"created_at\" timestamptz not null default now(), \"completed_at\" timestamptz null, \"idempotency_key\" varchar(256) null, \"started_at\" timestamptz null, \"deadline_at\" timestamptz null, \"version\" int not null default 1, primary key (\"tool_call_id\"))");
    this.addSql("create index \"idx_tool_calls_run\" on \"tool_calls\" (\"run_id\")");
    this.addSql("create index \"idx_tool_calls_deadline\" on \"tool_calls\" (\"deadline_at\")");
    this.addSql("create table \"approvals\" (\"approval_id\" varchar(64) not null, \"run_id\" varchar(64) not null, \"tool_call_id\" varchar(64) not null, \"status\" varchar(32) not null default 'PENDING', \"created_at\" timestamptz not null default now(), \"decided_at\" timestamptz null, \"decided_by\" varchar(64) null, \"reason\" text null, \"expires_at\" timestamptz not null, \"session_id\" varchar(64) not null, \"args_summary\" text null, \"version\" int not null default 1, primary key (\"approval_id\"))");
    this.addSql("create index \"idx_approvals_run\" on \"approvals\" (\"run_id\")");
    this.addSql("create index \"idx_approvals_expiry\" on \"approvals\" (\"status\", \"expires_at\")");
    this.addSql("alter table \"runs\" add constraint \"runs_session_id_foreign\" foreign key (\"session_id\") references \"sessions\" (\"session_id\")");
    this.addSql("alter table \"events\" add constraint \"events_run_id_foreign\" foreign key (\"run_id\") references \"runs\" (\"run_id\")");
    this.addSql("alter table \"messages\" add constraint \"messages_session_id_foreign\" foreign key (\"session_id\") references \"sessions\" (\"session_id\")");
    this.addSql("alter table \"tool_calls\" add constraint \"tool_calls_run_id_foreign\" foreign key (\"run_id\") references \"runs\" (\"run_id\")");
    this.addSql("alter table \"approvals\" add constraint \"approvals_run_id_foreign\" foreign key (\"run_id\") references \"runs\" (\"run_id\")");
    this.addSql("alter table \"approvals\" add constraint \"approvals_tool_call_id_foreign\" foreign key (\"tool_call_id\") references \"tool_calls\" (\"tool_call_id\")");
  }

  override async down(): Promise<void> {
    this.addSql("alter table \"runs\" drop constraint \"runs_session_id_foreign\"");
    this.addSql("alter table \"messages\" drop constraint \"messages_session_id_foreign\"");
    this.addSql("alter table \"events\" drop constraint \"events_run_id_foreign\"");
    this.addSql("alter table \"tool_calls\" drop constraint \"tool_calls_run_id_foreign\"");
    this.addSql("alter table \"approvals\" drop constraint \"approvals_run_id_foreign\"");
    this.addSql("alter table \"approvals\" drop constraint \"approvals_tool_call_id_foreign\"");
    this.addSql("drop table if exists \"agents\" cascade");
    this.addSql("drop table if exists \"api_keys\" cascade");
    this.addSql("drop table if exists \"assemblies\" cascade");
    this.addSql("drop table if exists \"context_blobs\" cascade");
    this.addSql("drop table if exists \"context_blob_versions\" cascade");
    this.addSql("drop table if exists \"contract_executions\" cascade");
    this.addSql("drop table if exists \"execution_contracts\" cascade");
    this.addSql("drop table if exists \"execution_transitions\" cascade");
    this.addSql("drop table if exists \"frozen_plans\" cascade");
    this.addSql("drop table if exists \"idempotency_keys\" cascade");
    this.addSql("drop table if exists \"memory\" cascade");
    this.addSql("drop table if exists \"policies\" cascade");
    this.addSql("drop table if exists \"sessions\" cascade");
    this.addSql("drop table if exists \"runs\" cascade");
    this.addSql("drop table if exists \"events\" cascade");
    this.addSql("drop table if exists \"messages\" cascade");
    this.addSql("drop table if exists \"snapshots\" cascade");
    this.addSql("drop table if exists \"tools\" cascade");
    this.addSql("drop table if exists \"tool_calls\" cascade");
    this.addSql("drop table if exists \"approvals\" cascade");
  }
}
