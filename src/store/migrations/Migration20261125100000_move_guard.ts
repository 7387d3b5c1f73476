import { Migration } from '@mikro-orm/migrations';

// abc_moved: the guard of a one-statement move with records of its own. A
// move whose row had moved on (a cancel won the race) matched no row, yet its
// other data-modifying CTEs (a plan, its step rows) were written and
// committed. The statement now refuses (SQLSTATE ABC02) and writes nothing.
export class Migration20261125100000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create or replace function "abc_moved"(p_matched boolean) returns boolean language plpgsql as $fn$
begin
  if not p_matched then
    raise exception using errcode = 'ABC02', message = 'abc_moved: the row is not in the state the move starts from';
  end if;
  return true;
end
$fn$`);
  }

  override async down(): Promise<void> {
    this.addSql('drop function if exists "abc_moved"(boolean)');
  }
}
