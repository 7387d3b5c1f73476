import { Migration } from '@mikro-orm/migrations';

export class Migration20261122045205 extends Migration {
  override async up(): Promise<void> {
    this.addSql("alter table \"runs\" add \"lease_owner\" varchar(64) null, add \"lease_until\" timestamptz null");
    this.addSql("create index \"idx_runs_lease\" on \"runs\" (\"status\", \"lease_until\")");
  }

  override async down(): Promise<void> {
    this.addSql("drop index \"idx_runs_lease\"");
    this.addSql("alter table \"runs\" drop column \"lease_owner\", drop column \"lease_until\"");
  }
}
