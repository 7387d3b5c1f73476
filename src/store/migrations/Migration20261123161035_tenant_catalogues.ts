import { Migration } from '@mikro-orm/migrations';

export class Migration20261123161035 extends Migration {
  override async up(): Promise<void> {
    // What was registered before tenants stays where every tenant sees it: the platform's (`*`).
    for (const table of ['assemblies', 'contract_versions', 'policies']) {
      this.addSql(`alter table "${table}" add "tenant_id" varchar(64) not null default '*'`);
      this.addSql(`alter table "${table}" alter column "tenant_id" drop default`);
    }
    this.addSql("alter table \"assemblies\" drop constraint \"assemblies_pkey\"");
    this.addSql("alter table \"assemblies\" add primary key (\"tenant_id\", \"assembly_id\", \"version\")");
    this.addSql("alter table \"contract_versions\" drop constraint \"contract_versions_pkey\"");
    this.addSql("alter table \"contract_versions\" add primary key (\"tenant_id\", \"contract_id\", \"version\")");
    this.addSql("create index \"idx_policies_tenant\" on \"policies\" (\"tenant_id\")");
  }

  override async down(): Promise<void> {
    this.addSql("alter table \"assemblies\" drop constraint \"assemblies_pkey\"");
    this.addSql("alter table \"assemblies\" drop column \"tenant_id\"");
    this.addSql("alter table \"assemblies\" add primary key (\"assembly_id\", \"version\")");
    this.addSql("alter table \"contract_versions\" drop constraint \"contract_versions_pkey\"");
    this.addSql("alter table \"contract_versions\" drop column \"tenant_id\"");
    this.addSql("alter table \"contract_versions\" add primary key (\"contract_id\", \"version\")");
    this.addSql("drop index \"idx_policies_tenant\"");
    this.addSql("alter table \"policies\" drop column \"tenant_id\"");
  }
}
