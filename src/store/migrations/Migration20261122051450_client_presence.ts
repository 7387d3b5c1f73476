import { Migration } from '@mikro-orm/migrations';

export class Migration20261122051450 extends Migration {
  override async up(): Promise<void> {
    this.addSql("create table \"client_connections\" (\"connection_id\" varchar(64) not null, \"session_id\" varchar(64) not null, \"user_id\" varchar(64) not null, \"core_id\" varchar(64) not null, \"seen_at\" timestamptz not null default now(), primary key (\"connection_id\", \"session_id\"))");
    this.addSql("create index \"idx_client_connections_session\" on \"client_connections\" (\"session_id\", \"seen_at\")");
  }

  override async down(): Promise<void> {
    this.addSql("drop table if exists \"client_connections\" cascade");
  }
}
