import { Migration } from '@mikro-orm/migrations';

export class Migration20261123141011 extends Migration {
  override async up(): Promise<void> {
    this.addSql("create table \"tenants\" (\"tenant_id\" varchar(64) not null, \"name\" varchar(128) not null, \"created_at\" timestamptz not null default now(), primary key (\"tenant_id\"))");
    // Everything that existed before tenants belongs to the default tenant, as does the embedded single user.
    this.addSql("insert into \"tenants\" (\"tenant_id\", \"name\") values ('default', 'default')");
    this.addSql("alter table \"agents\" drop constraint \"agents_pkey\"");
    this.addSql("alter table \"agents\" add \"tenant_id\" varchar(64) not null default 'default', add \"owner_key_id\" varchar(64) null");
    this.addSql("alter table \"agents\" alter column \"tenant_id\" drop default");
    this.addSql("alter table \"agents\" add primary key (\"tenant_id\", \"agent_id\")");
    this.addSql("alter table \"api_keys\" add \"tenant_id\" varchar(64) not null default 'default', add \"scopes\" jsonb not null default '[\"admin\"]', add \"user_ids\" jsonb null");
    this.addSql("alter table \"context_blobs\" drop constraint \"context_blobs_pkey\"");
    this.addSql("alter table \"context_blobs\" add \"tenant_id\" varchar(64) not null default 'default'");
    this.addSql("alter table \"context_blobs\" alter column \"tenant_id\" drop default");
    this.addSql("alter table \"context_blobs\" add primary key (\"tenant_id\", \"context_key\")");
    this.addSql("alter table \"context_blob_versions\" drop constraint \"context_blob_versions_pkey\"");
    this.addSql("alter table \"context_blob_versions\" add \"tenant_id\" varchar(64) not null default 'default'");
    this.addSql("alter table \"context_blob_versions\" alter column \"tenant_id\" drop default");
    this.addSql("alter table \"context_blob_versions\" add primary key (\"tenant_id\", \"context_key\", \"version\")");
    this.addSql("alter table \"execution_contracts\" add \"tenant_id\" varchar(64) not null default 'default'");
    this.addSql("alter table \"execution_contracts\" alter column \"tenant_id\" drop default");
    this.addSql("alter table \"memory\" drop constraint \"uq_memory_scope_key\"");
    this.addSql("alter table \"memory\" add \"tenant_id\" varchar(64) not null default 'default'");
    this.addSql("alter table \"memory\" alter column \"tenant_id\" drop default");
    this.addSql("alter table \"memory\" add constraint \"uq_memory_scope_key\" unique (\"tenant_id\", \"scope\", \"scope_id\", \"key\")");
    this.addSql("alter table \"sessions\" add \"tenant_id\" varchar(64) not null default 'default'");
    this.addSql("alter table \"sessions\" alter column \"tenant_id\" drop default");
    this.addSql("alter table \"runs\" add \"tenant_id\" varchar(64) not null default 'default'");
    this.addSql("alter table \"runs\" alter column \"tenant_id\" drop default");
    this.addSql("create index \"idx_runs_tenant_status\" on \"runs\" (\"tenant_id\", \"status\")");
    this.addSql("alter table \"tickets\" drop constraint \"uq_tickets_idempotency\"");
    this.addSql("alter table \"tickets\" add \"tenant_id\" varchar(64) not null default 'default'");
    this.addSql("alter table \"tickets\" alter column \"tenant_id\" drop default");
    this.addSql("alter table \"tickets\" add constraint \"uq_tickets_idempotency\" unique (\"tenant_id\", \"contract_id\", \"idempotency_key\")");
    this.addSql("alter table \"tools\" drop constraint \"tools_pkey\"");
    // Tools registered before tenants join the platform catalog (\`*\`), which every tenant sees, as the built-ins do.
    this.addSql("alter table \"tools\" add \"tenant_id\" varchar(64) not null default '*'");
    this.addSql("alter table \"tools\" alter column \"tenant_id\" drop default");
    this.addSql("alter table \"tools\" add primary key (\"tenant_id\", \"tool_name\")");
  }

  override async down(): Promise<void> {
    this.addSql("drop table if exists \"tenants\" cascade");
    this.addSql("alter table \"agents\" drop constraint \"agents_pkey\"");
    this.addSql("alter table \"agents\" drop column \"tenant_id\", drop column \"owner_key_id\"");
    this.addSql("alter table \"agents\" add primary key (\"agent_id\")");
    this.addSql("alter table \"api_keys\" drop column \"tenant_id\", drop column \"scopes\", drop column \"user_ids\"");
    this.addSql("alter table \"context_blobs\" drop constraint \"context_blobs_pkey\"");
    this.addSql("alter table \"context_blobs\" drop column \"tenant_id\"");
    this.addSql("alter table \"context_blobs\" add primary key (\"context_key\")");
    this.addSql("alter table \"context_blob_versions\" drop constraint \"context_blob_versions_pkey\"");
    this.addSql("alter table \"context_blob_versions\" drop column \"tenant_id\"");
    this.addSql("alter table \"context_blob_versions\" add primary key (\"context_key\", \"version\")");
    this.addSql("alter table \"execution_contracts\" drop column \"tenant_id\"");
    this.addSql("alter table \"memory\" drop constraint \"uq_memory_scope_key\"");
    this.addSql("alter table \"memory\" drop column \"tenant_id\"");
    this.addSql("alter table \"memory\" add constraint \"uq_memory_scope_key\" unique (\"scope\", \"scope_id\", \"key\")");
    this.addSql("drop index \"idx_runs_tenant_status\"");
    this.addSql("alter table \"runs\" drop column \"tenant_id\"");
    this.addSql("alter table \"sessions\" drop column \"tenant_id\"");
    this.addSql("alter table \"tickets\" drop constraint \"uq_tickets_idempotency\"");
    this.addSql("alter table \"tickets\" drop column \"tenant_id\"");
    this.addSql("alter table \"tickets\" add constraint \"uq_tickets_idempotency\" unique (\"contract_id\", \"idempotency_key\")");
    this.addSql("alter table \"tools\" drop constraint \"tools_pkey\"");
    this.addSql("alter table \"tools\" drop column \"tenant_id\"");
    this.addSql("alter table \"tools\" add primary key (\"tool_name\")");
  }
}
