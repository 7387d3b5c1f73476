// bench/observer: timeline and snapshot queries per second for a session with
// 1,000 execution contracts, through ABC (HTTP gateway → gRPC → core →
// read-only pool), against a raw SQL query returning the same rows.
import pg from 'pg';
import { benchDatabase, fmt, loadCalls, record, startAbc, startReadFloor } from './lib.js';

const CONTRACTS = 1000;
const CONCURRENCY = 8;
const TIMELINES = Number(process.env.BENCH_TIMELINES ?? 100);
const SNAPSHOTS = Number(process.env.BENCH_SNAPSHOTS ?? 3000);

/** 1,000 finished tool-call contracts with two transitions each, as the writer leaves them. */
async function seed(db: pg.Pool, session: string): Promise<string[]> {
  const ids = Array.from({ length: CONTRACTS }, (_, i) => `exe_bench_${String(i).padStart(5, '0')}`);
  await db.query(
    `INSERT INTO execution_contracts (execution_id, tenant_id, session_id, run_id, subject_id, action_type, action_summary, status, irreversible, idempotency_key, result, created_at, entered_at)
     SELECT id, 'default', $1, NULL, id, 'tool_call', 'email.send → user' || n || '@example.com', 'completed', n % 3 = 0, 'key-' || n, '{"ok":true}',
            now() - (($2 - n) * interval '1 second'), now() - (($2 - n) * interval '1 second') + interval '400 milliseconds'
     FROM unnest($3::text[]) WITH ORDINALITY AS x(id, n)`,
    [session, CONTRACTS, ids],
  );
  await db.query(
    `INSERT INTO execution_transitions (execution_id, sequence_number, from_status, to_status, trigger, actor, actor_category, ts)
     SELECT c.execution_id, s.seq, s.f, s.t, s.tr, 'tool_node', 'tool', c.created_at + s.seq * interval '400 milliseconds'
     FROM execution_contracts c, (VALUES (0, 'pending', 'running', 'start'), (1, 'running', 'completed', 'succeed')) AS s(seq, f, t, tr)
     WHERE c.session_id = $1`,
    [session],
  );
  return ids;
}

export async function observer(): Promise<void> {
  const db = await benchDatabase('bench_observer');
  const abc = await startAbc(db.url, { ABC_CONTRACT_WORKERS: '0' });
  const raw = new pg.Pool({ connectionString: db.url, max: CONCURRENCY });
  const TIMELINE_SQL = `SELECT c.*, (SELECT json_agg(t ORDER BY t.sequence_number) FROM execution_transitions t WHERE t.execution_id = c.execution_id) AS transitions
     FROM execution_contracts c WHERE c.session_id = $1 ORDER BY c.created_at`;
  const SNAPSHOT_SQL = `SELECT c.*, (SELECT json_agg(t ORDER BY t.sequence_number) FROM execution_transitions t WHERE t.execution_id = c.execution_id) AS transitions
     FROM execution_contracts c WHERE c.execution_id = $1`;
  const floor = await startReadFloor(db.url, { timeline: TIMELINE_SQL, snapshot: SNAPSHOT_SQL });
  try {
    const session = 'bench-session-1000';
    const ids = await seed(raw, session);
    const headers = { authorization: `Bearer ${abc.key}` };
    const timeline = async () => {
      const res = await fetch(`${abc.http}/api/execution/${session}/timeline`, { headers });
      const body = (await res.json()) as { total_contracts: number };
      if (body.total_contracts !== CONTRACTS) throw new Error(`timeline had ${body.total_contracts} contracts`);
    };
    const snapshot = async (i: number) => {
      const res = await fetch(`${abc.http}/api/execution/${ids[i % ids.length]}/snapshot`, { headers });
      if (res.status !== 200) throw new Error(`snapshot answered ${res.status}`);
      await res.arrayBuffer();
    };
    const rawTimeline = () => raw.query(TIMELINE_SQL, [session]);
    const rawSnapshot = (i: number) => raw.query(SNAPSHOT_SQL, [ids[i % ids.length]]);
    for (let i = 0; i < 10; i++) await Promise.all([timeline(), snapshot(i), rawTimeline(), rawSnapshot(i), floor.get('grpc', 'timeline', session), floor.get('grpc', 'snapshot', ids[0]!)]);

    // ABC, the raw SQL, and the floor of a gateway in front of it (HTTP -> gRPC -> SQL), interleaved halves.
    let [t, rt, ft, s, rs, fs] = [0, 0, 0, 0, 0, 0];
    for (let round = 0; round < 2; round++) {
      t += (await loadCalls(TIMELINES / 2, CONCURRENCY, timeline)).rps;
      rt += (await loadCalls(TIMELINES / 2, CONCURRENCY, rawTimeline)).rps;
      ft += (await loadCalls(TIMELINES / 2, CONCURRENCY, () => floor.get('grpc', 'timeline', session))).rps;
      s += (await loadCalls(SNAPSHOTS / 2, CONCURRENCY, snapshot)).rps;
      rs += (await loadCalls(SNAPSHOTS / 2, CONCURRENCY, rawSnapshot)).rps;
      fs += (await loadCalls(SNAPSHOTS / 2, CONCURRENCY, (i) => floor.get('grpc', 'snapshot', ids[i % ids.length]!))).rps;
    }
    console.log(`\n## observer (a session of ${CONTRACTS} contracts, concurrency ${CONCURRENCY}, through gateway → gRPC → core)`);
    console.log(`timeline/s: ${fmt(t / 2, 1)}  raw SQL/s: ${fmt(rt / 2, 1)}  ratio: ${fmt(t / rt, 3)}x`);
    console.log(`snapshot/s: ${fmt(s / 2, 0)}  raw SQL/s: ${fmt(rs / 2, 0)}  ratio: ${fmt(s / rs, 3)}x`);
    console.log(`  floors (HTTP + gRPC + SQL): timeline ${fmt(ft / 2, 1)}/s (${fmt(ft / rt, 3)}x raw; ABC ${fmt(t / ft, 3)}x floor), snapshot ${fmt(fs / 2, 0)}/s (${fmt(fs / rs, 3)}x raw; ABC ${fmt(s / fs, 3)}x floor)`);
    record({ bench: 'observer', name: 'timeline reads per second', value: t / 2, unit: 'reads/s', ratio: t / rt, against: 'raw SQL of the same rows', goal: '>= 0.6x' });
    record({ bench: 'observer', name: 'snapshot reads per second', value: s / 2, unit: 'reads/s', ratio: s / rs, against: 'raw SQL of the same rows', goal: '>= 0.5x' });
    record({ bench: 'observer', name: 'timeline floor: HTTP + gRPC + SQL', value: ft / 2, unit: 'reads/s', ratio: ft / rt, against: 'raw SQL of the same rows' });
    record({ bench: 'observer', name: 'snapshot floor: HTTP + gRPC + SQL', value: fs / 2, unit: 'reads/s', ratio: fs / rs, against: 'raw SQL of the same rows' });
    record({ bench: 'observer', name: 'timeline reads against the gRPC floor', value: t / 2, unit: 'reads/s', ratio: t / ft, against: 'HTTP + gRPC + SQL, no ABC work' });
    record({ bench: 'observer', name: 'snapshot reads against the gRPC floor', value: s / 2, unit: 'reads/s', ratio: s / fs, against: 'HTTP + gRPC + SQL, no ABC work' });
  } finally {
    floor.stop();
    await raw.end();
    await abc.stop();
    await db.close();
  }
}
