import { Migration } from '@mikro-orm/migrations';

// Memory's full-text document as a stored column: a search ranks its matches
// on the stored vector instead of parsing each matching row's value twice
// (filter and rank). With one success entry per contract in GLOBAL memory,
// the engine's similar-successes search had grown with every contract.
export class Migration20261124120000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "memory" add column "search" tsvector generated always as (to_tsvector('simple', key || ' ' || coalesce(value::text, ''))) stored`);
    this.addSql('drop index "idx_memory_search"');
    this.addSql('create index "idx_memory_search" on "memory" using gin ("search")');
  }

  override async down(): Promise<void> {
    this.addSql('drop index "idx_memory_search"');
    this.addSql('alter table "memory" drop column "search"');
    this.addSql(`create index "idx_memory_search" on "memory" using gin (to_tsvector('simple', key || ' ' || coalesce(value::text, '')))`);
  }
}
