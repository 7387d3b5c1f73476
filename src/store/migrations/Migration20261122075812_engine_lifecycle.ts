import { Migration } from '@mikro-orm/migrations';

export class Migration20261122075812 extends Migration {
  override async up(): Promise<void> {
    this.addSql("alter table \"contract_executions\" add \"engine\" jsonb not null default '{}', add \"human_deadline\" timestamptz null");
    this.addSql("alter table \"contract_steps\" add \"side_effect\" boolean not null default false");
    this.addSql("drop index \"idx_memory_scope_key\"");
    // Keep the newest entry of any duplicated key before the key becomes unique.
    this.addSql("delete from \"memory\" m using \"memory\" n where m.scope = n.scope and m.scope_id = n.scope_id and m.key = n.key and (m.created_at, m.memory_id) < (n.created_at, n.memory_id)");
    this.addSql("create index \"idx_memory_search\" on \"memory\" using gin (to_tsvector('simple', key || ' ' || coalesce(value::text, '')))");
    this.addSql("alter table \"memory\" add constraint \"uq_memory_scope_key\" unique (\"scope\", \"scope_id\", \"key\")");
    // Seed 002's lifecycle replaces the seed 000 pipeline states.
    this.addSql(`update "contract_executions" set "lifecycle_state" = case "lifecycle_state"
      when 'QUEUED' then 'INIT' when 'RESOLVING_CONTEXT' then 'CONTEXT_BUILD' when 'PLANNING' then 'PLAN_GENERATION'
      when 'EXECUTING' then 'STEP_EXECUTION' when 'AGGREGATING' then 'GLOBAL_REVIEW' when 'SUCCEEDED' then 'COMPLETED'
      else "lifecycle_state" end`);
  }

  override async down(): Promise<void> {
    this.addSql("alter table \"contract_executions\" drop column \"engine\", drop column \"human_deadline\"");
    this.addSql("alter table \"contract_steps\" drop column \"side_effect\"");
    this.addSql("drop index \"idx_memory_search\"");
    this.addSql("alter table \"memory\" drop constraint \"uq_memory_scope_key\"");
    this.addSql("create index \"idx_memory_scope_key\" on \"memory\" (\"scope\", \"scope_id\", \"key\")");
    this.addSql(`update "contract_executions" set "lifecycle_state" = case "lifecycle_state"
      when 'INIT' then 'QUEUED' when 'CONTEXT_BUILD' then 'RESOLVING_CONTEXT' when 'STEP_EXECUTION' then 'EXECUTING'
      when 'GLOBAL_REVIEW' then 'AGGREGATING' when 'COMPLETED' then 'SUCCEEDED' else "lifecycle_state" end`);
  }
}
