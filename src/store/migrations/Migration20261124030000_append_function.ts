import { Migration } from '@mikro-orm/migrations';

// The event log's one append (store/event-log.ts) as a PL/pgSQL function:
// each connection plans its statement once, inside a transaction as well as
// on its own; planned on every call, the statement cost twice as much.

/** The function's first definition (migration announce_after_commit changes it). */
export const APPEND_EVENTS_V1 = `create or replace function "abc_append_events"(p_input jsonb, p_wanted jsonb, p_channel text, p_origin text) returns setof "events" language plpgsql as $fn$
begin
  return query
  with input as (
    select * from jsonb_to_recordset(p_input) as e(event_id text, run_id text, i int, ts bigint, type text, payload jsonb)
  ), wanted as (
    select * from jsonb_to_recordset(p_wanted) as w(run_id text, n int, active bool)
  ), run as (
    update runs r set last_seq = r.last_seq + w.n from wanted w
    where r.run_id = w.run_id and (not w.active or r.status not in ('DONE', 'FAILED', 'CANCELLED'))
    returning r.run_id, r.session_id, r.last_seq - w.n as base, w.n
  ), per_session as (
    select run.session_id, sum(run.n)::int as n from run group by run.session_id
  ), head as (
    update sessions s set event_head = s.event_head + p.n from per_session p where s.session_id = p.session_id
    returning s.session_id, s.event_head - p.n as base
  ), added as (
    insert into events (event_id, run_id, session_id, seq, session_seq, ts, type, payload)
    select e.event_id, e.run_id, run.session_id, run.base + e.i,
           head.base + row_number() over (partition by run.session_id order by e.run_id, e.i), e.ts, e.type, e.payload
    from input e join run on run.run_id = e.run_id join head on head.session_id = run.session_id
    order by run.session_id, e.run_id, e.i
    returning *
  ), notified as (
    select pg_notify(p_channel, added.session_id || ' ' || added.run_id || ' ' || max(added.id) || ' ' || max(added.session_seq) || ' ' || max(added.seq) || ' ' || p_origin)
    from added group by added.session_id, added.run_id
  )
  select added.* from added, (select count(*) from notified) n;
end
$fn$`;

export class Migration20261124030000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(APPEND_EVENTS_V1);
  }

  override async down(): Promise<void> {
    this.addSql('drop function if exists "abc_append_events"(jsonb, jsonb, text, text)');
  }
}
