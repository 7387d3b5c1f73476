import { Migration } from '@mikro-orm/migrations';

// Only GLOBAL memory keeps its full-text document stored and indexed. Every
// contract step and tool call writes SESSION and EPHEMERAL rows (its step
// context, its execution fact), and each paid for a tsvector and a GIN entry
// that no search used through the index: a SESSION or EPHEMERAL scope holds a
// few rows, found by the scope key, and a search there builds their documents
// as it reads them (store/memory.ts).
const DOCUMENT = "to_tsvector('simple', key || ' ' || coalesce(value::text, ''))";

export class Migration20261124160000 extends Migration {
  override async up(): Promise<void> {
    this.addSql('drop index "idx_memory_search"');
    this.addSql('alter table "memory" drop column "search"');
    this.addSql(`alter table "memory" add column "search" tsvector generated always as (case when scope = 'GLOBAL' then ${DOCUMENT} else null end) stored`);
    this.addSql(`create index "idx_memory_search" on "memory" using gin ("search") where scope = 'GLOBAL'`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index "idx_memory_search"');
    this.addSql('alter table "memory" drop column "search"');
    this.addSql(`alter table "memory" add column "search" tsvector generated always as (${DOCUMENT}) stored`);
    this.addSql('create index "idx_memory_search" on "memory" using gin ("search")');
  }
}
