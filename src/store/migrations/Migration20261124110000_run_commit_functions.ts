import { Migration } from '@mikro-orm/migrations';

// An IM run's start and its completion as one call each (store/run-store.ts):
// - abc_start_run: the session (made or found), the run in the state its start
//   reaches, the user's message and the run's first events;
// - abc_complete_run: the move, the assistant's message, the run-ended NOTIFY
//   and the run's last events.
// The moves are decided by the run machine's transition() before the call. A
// session of another tenant or user, or a run in another state than the move
// starts from (paused, cancelled), aborts the call (SQLSTATE ABC01) with
// nothing written, and the caller takes its transactional path.

/** The first definitions, which migration run_commit_events replaces (and restores when undone). */
export const START_RUN_V1 = `create or replace function "abc_start_run"(p jsonb) returns jsonb language plpgsql as $fn$
declare
  r jsonb := p->'run';
  v_session sessions;
  v_run runs;
  v_first bigint;
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
  select min(e.id) into v_first from abc_append_events(p->'events', p->'wanted', p->>'channel', '') e;
  return jsonb_build_object('run', to_jsonb(v_run), 'first_id', v_first::text);
end
$fn$`;

export const COMPLETE_RUN_V1 = `create or replace function "abc_complete_run"(p jsonb) returns jsonb language plpgsql as $fn$
declare
  v_run runs;
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
  perform 1 from abc_append_events(p->'events', p->'wanted', p->>'channel', '');
  return to_jsonb(v_run);
end
$fn$`;

export class Migration20261124110000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(START_RUN_V1);
    this.addSql(COMPLETE_RUN_V1);
  }

  override async down(): Promise<void> {
    this.addSql('drop function if exists "abc_complete_run"(jsonb)');
    this.addSql('drop function if exists "abc_start_run"(jsonb)');
  }
}
