import { Migration } from '@mikro-orm/migrations';
import { edit, START_RUN_V2 } from './Migration20261124150000_run_commit_events.js';

// abc_start_run checks the tenant's limit of runs going at once itself, when
// given one (p->>'max_live', the states that count in p->'live'): a start costs
// one round trip, not two. Over the limit it refuses with SQLSTATE ABC03,
// having written nothing; a caller without `max_live` meets no limit, as
// before. A start that opened its session answers the session's whole
// transcript: the message it wrote. V2 with these lines changed.
export const START_RUN_V3 = edit(
  START_RUN_V2,
  ['  v_session sessions;', '  v_tenant text;\n  v_user text;\n  v_opened boolean;\n  v_message messages;'],
  [
    'begin\n',
    `begin
  if coalesce((p->>'max_live')::int, 0) > 0
     and (select count(*) from runs where tenant_id = r->>'tenant_id' and status = any(array(select jsonb_array_elements_text(p->'live')))) >= (p->>'max_live')::int then
    raise exception using errcode = 'ABC03', message = 'abc_start_run: the tenant has as many runs going as its limit allows';
  end if;
`,
  ],
  ['  returning * into v_session;', '  returning tenant_id, user_id, xmax = 0 into v_tenant, v_user, v_opened;'],
  ["  if v_session.tenant_id is distinct from r->>'tenant_id' or v_session.user_id is distinct from r->>'user_id' then", "  if v_tenant is distinct from r->>'tenant_id' or v_user is distinct from r->>'user_id' then"],
  ["'user', p->'message'->>'content', null, clock_timestamp());", "'user', p->'message'->>'content', null, clock_timestamp())\n  returning * into v_message;"],
  ["'events', coalesce(v_events, '[]'));", "'events', coalesce(v_events, '[]'), 'transcript', case when v_opened then jsonb_build_array(to_jsonb(v_message)) end);"],
);

export class Migration20261127080000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(START_RUN_V3);
  }

  override async down(): Promise<void> {
    this.addSql(START_RUN_V2);
  }
}
