import { Migration } from '@mikro-orm/migrations';
import { COMPLETE_RUN_V1, START_RUN_V1 } from './Migration20261124110000_run_commit_functions.js';

// abc_start_run and abc_complete_run (migration run_commit_functions) also
// return the events they appended, and name the core that wrote them in the
// notification (p->>'origin'): that core hands the events to its own watchers,
// as the event appender does, and they need not read them back. Both results
// only gain a key; a call without an origin notifies as before.
export class Migration20261124150000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create or replace function "abc_start_run"(p jsonb) returns jsonb language plpgsql as $fn$
declare
  r jsonb := p->'run';
  v_session sessions;
  v_run runs;
  v_events jsonb;
begin
  insert into sessions (session_id, user_id, tenant_id) values (r->>'session_id', r->>'user_id', r->>'tenant_id')
  on conflict (session_id) do update set session_id = excluded.session_id
  returning * into v_session;
  if v_session.tenant_id is distinct from r->>'tenant_id' or v_session.user_id is distinct from r->>'user_id' then
    raise exception using errcode = 'ABC01', message = 'abc_start_run: the session is another tenant''s or user''s';
  end if;
  insert into runs (run_id, session_id, root_agent_id, status, request_id, trace_id, traceparent, token_hash, user_id, tenant_id, lease_owner, lease_until, version)
  values (r->>'run_id', r->>'session_id', r->>'agent_id', r->>'status', r->>'request_id', r->>'trace_id', r->>'traceparent', r->>'token_hash', r->>'user_id',
          r->>'tenant_id', r->>'lease_owner', now() + ((r->>'lease_ms')::int * interval '1 millisecond'), 1 + (r->>'hops')::int)
  returning * into v_run;
  insert into messages (message_id, session_id, run_id, role, content, metadata, created_at)
  values (p->'message'->>'message_id', v_run.session_id, v_run.run_id, 'user', p->'message'->>'content', null, clock_timestamp());
  select jsonb_agg(to_jsonb(e) order by e.id) into v_events from abc_append_events(p->'events', p->'wanted', p->>'channel', coalesce(p->>'origin', '')) e;
  return jsonb_build_object('run', to_jsonb(v_run), 'first_id', (v_events->0->>'id'), 'events', coalesce(v_events, '[]'));
end
$fn$`);

    this.addSql(`create or replace function "abc_complete_run"(p jsonb) returns jsonb language plpgsql as $fn$
declare
  v_run runs;
  v_events jsonb;
begin
  update runs r set status = p->>'to', ended_at = now(), version = r.version + 1
  where r.run_id = p->>'run_id' and r.status = p->>'from'
  returning * into v_run;
  if not found then
    raise exception using errcode = 'ABC01', message = 'abc_complete_run: the run is not ' || (p->>'from');
  end if;
  insert into messages (message_id, session_id, run_id, role, content, metadata, created_at)
  values (p->'message'->>'message_id', v_run.session_id, v_run.run_id, 'assistant', p->'message'->>'content', p->'message'->'metadata', clock_timestamp());
  perform pg_notify(p->>'ended_channel', v_run.run_id);
  select jsonb_agg(to_jsonb(e) order by e.id) into v_events from abc_append_events(p->'events', p->'wanted', p->>'channel', coalesce(p->>'origin', '')) e;
  return to_jsonb(v_run) || jsonb_build_object('appended', coalesce(v_events, '[]'));
end
$fn$`);
  }

  override async down(): Promise<void> {
    this.addSql(START_RUN_V1);
    this.addSql(COMPLETE_RUN_V1);
  }
}
