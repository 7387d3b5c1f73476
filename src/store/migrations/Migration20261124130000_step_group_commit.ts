import { Migration } from '@mikro-orm/migrations';

// Several steps' commits of one batch as one call: each as abc_commit_step
// writes it, in order, in one statement and one commit. A step in any other
// state than its moves start from aborts the whole call (SQLSTATE ABC01).
export class Migration20261124130000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create or replace function "abc_commit_steps"(p jsonb) returns setof "ticket_steps" language plpgsql as $fn$
declare
  c jsonb;
begin
  for c in select x from jsonb_array_elements(p) as x loop
    return query select * from abc_commit_step(c);
  end loop;
end
$fn$`);
  }

  override async down(): Promise<void> {
    this.addSql('drop function if exists "abc_commit_steps"(jsonb)');
  }
}
