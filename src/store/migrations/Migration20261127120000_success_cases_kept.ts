import { Migration } from '@mikro-orm/migrations';

// GLOBAL memory keeps the newest 20 success cases per tenant and intent
// (SUCCESS_CASES_KEPT in store/memory.ts; the final move of each execution
// drops the older ones). This drops what older versions kept beyond that.
// An intent is snake_case: the second part of `success:<intent>:<ticket>`.
// Keys are found by prefix (success cases, failure patterns) through an index
// in byte order: in any collation but "C", starts_with() scanned every GLOBAL
// key of the tenant.
export class Migration20261127120000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`delete from "memory" m using (
      select memory_id, row_number() over (partition by tenant_id, split_part(key, ':', 2) order by created_at desc, memory_id desc) as n
      from "memory" where scope = 'GLOBAL' and scope_id = 'global' and starts_with(key, 'success:')
    ) r where m.memory_id = r.memory_id and r.n > 20`);
    this.addSql(`create index "idx_memory_key_bytes" on "memory" ("tenant_id", "scope", "scope_id", "key" collate "C")`);
  }

  override async down(): Promise<void> {
    // The dropped cases are not restored.
    this.addSql('drop index "idx_memory_key_bytes"');
  }
}
