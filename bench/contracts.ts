// bench/contracts: the business contract API through ABC (HTTP gateway → gRPC →
// core → queue worker), with ratios against baselines from the same run:
// - submits and polls per second at concurrency 16, submits against a floor of
//   one committed INSERT and one of the rows an async submit commits;
// - poll throughput against a raw SELECT of the same row over pg;
// - submit-to-done latency for analyze_portfolio, p50 and p99 (sync, and async + long poll).
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { benchDatabase, contractBody, fmt, importSamplePortfolios, loadCalls, percentile, record, startAbc, startReadFloor } from './lib.js';

const CONCURRENCY = 16;
const SUBMITS = Number(process.env.BENCH_SUBMITS ?? 400);
const POLLS = Number(process.env.BENCH_POLLS ?? 4000);
const LATENCY_RUNS = Number(process.env.BENCH_LATENCY_RUNS ?? 60);

/** The tenant and the queue task of the submit records floor's rows, which ABC never reads. */
const FLOOR_TENANT = 'bench-floor';
const FLOOR_TASK = 'bench_floor_execute';

/**
 * The submit records floor's statement ($1: a fresh id): the rows an async
 * submit commits, in ABC's tables with their indexes (its ticket with the
 * request, its ticket_created event, its graphile-worker job) in one commit,
 * and a notification as the job's wake-up, on a channel no worker listens
 * to, so that ABC's idle workers do not wake. The request is a literal here;
 * ABC's arrives in the HTTP body.
 */
function submitRecordsSql(): string {
  const request = contractBody('async', 'bench-session').replace(/'/g, "''");
  return `WITH t AS (
      INSERT INTO tickets (ticket, tenant_id, contract_id, contract_version, request_id, session_id, idempotency_key, request_hash, request,
        mode, status, phase, lifecycle_state, trace_id, expected_latency_ms, expires_at, event_seq)
      VALUES ($1::text, '${FLOOR_TENANT}', 'com.thaleon.wm:analyze-portfolio', '1.0.0', $1::text, 'bench-session', $1::text, md5($1::text), '${request}'::jsonb,
        'async', 'QUEUED', 'validate', 'INIT', md5($1::text), 400, now() + interval '1 day', 1)
      RETURNING ticket),
    e AS (INSERT INTO ticket_events (ticket, seq, ts, type, payload)
      SELECT ticket, 1, (extract(epoch from now()) * 1000)::bigint, 'ticket_created', jsonb_build_object('request_id', ticket, 'session_id', 'bench-session') FROM t),
    j AS (INSERT INTO graphile_worker._private_jobs (task_id, payload, key)
      SELECT k.id, json_build_object('ticket', t.ticket), t.ticket FROM t, graphile_worker._private_tasks k WHERE k.identifier = '${FLOOR_TASK}'
      RETURNING id)
    SELECT (SELECT id FROM j) AS job, pg_notify('bench_floor_jobs', '{"count":1}')`;
}

/** Drops the submit records floor's rows and its task's jobs before ABC's turn. */
const DROP_FLOOR_RECORDS = `
  DELETE FROM ticket_events WHERE ticket IN (SELECT ticket FROM tickets WHERE tenant_id = '${FLOOR_TENANT}');
  DELETE FROM tickets WHERE tenant_id = '${FLOOR_TENANT}';
  DELETE FROM graphile_worker._private_jobs WHERE task_id IN (SELECT id FROM graphile_worker._private_tasks WHERE identifier = '${FLOOR_TASK}')`;

export async function contracts(): Promise<void> {
  const db = await benchDatabase('bench_contracts');
  const abc = await startAbc(db.url, { ABC_CONTRACT_WORKERS: '4' });
  const raw = new pg.Pool({ connectionString: db.url, max: CONCURRENCY });
  const POLL_SQL = 'SELECT * FROM tickets WHERE ticket = $1';
  // A durable submit's floor: one row inserted and committed, through the same hops.
  await raw.query('CREATE TABLE bench_submits (id text PRIMARY KEY, body jsonb NOT NULL)');
  const floor = await startReadFloor(db.url, { poll: POLL_SQL, submit: "INSERT INTO bench_submits VALUES ($1, '{}') RETURNING id", records: submitRecordsSql() });
  try {
    await importSamplePortfolios(db.url);
    const headers = { authorization: `Bearer ${abc.key}`, 'content-type': 'application/json' };
    const submit = async (mode: 'sync' | 'async') => {
      const res = await fetch(`${abc.http}/v1/contracts:submit`, { method: 'POST', headers, body: contractBody(mode, 'bench-session') });
      const json = (await res.json()) as { task?: { ticket: string }; kind: string };
      if (res.status >= 300) throw new Error(`submit answered ${res.status}: ${JSON.stringify(json)}`);
      return { json, ticket: res.headers.get('x-abc-ticket')! };
    };
    const poll = async (ticket: string, wait = 0) => {
      const res = await fetch(`${abc.http}/v1/tickets/${ticket}${wait ? `?wait_ms=${wait}` : ''}`, { headers });
      return (await res.json()) as { status: string };
    };

    // Warm-up: compile paths, fill pools.
    for (let i = 0; i < 20; i++) await submit('sync');
    await loadCalls(SUBMITS / 2, CONCURRENCY, () => floor.get('grpc', 'submit', randomUUID()));

    // 1. The floor of a durable submit through a gateway (HTTP -> gRPC -> one INSERT
    //    committed), while ABC is idle; then ABC's submits per second (async: the
    //    ticket commits claimed by its admission, then the answer; its job is
    //    added right after, with the others admitted meanwhile). ABC's workers start on the
    //    contracts at once and run on after the burst, so the floors go first: one INSERT,
    //    then the rows an async submit commits (checked, then dropped).
    const submitFloor = (await loadCalls(SUBMITS, CONCURRENCY, () => floor.get('grpc', 'submit', randomUUID()))).rps;
    await raw.query(`INSERT INTO graphile_worker._private_tasks (identifier) VALUES ('${FLOOR_TASK}') ON CONFLICT DO NOTHING`);
    const recordsWarm = SUBMITS / 4;
    await loadCalls(recordsWarm, CONCURRENCY, () => floor.get('grpc', 'records', randomUUID()));
    const recordsFloor = (await loadCalls(SUBMITS, CONCURRENCY, () => floor.get('grpc', 'records', randomUUID()))).rps;
    const { rows: [kept] } = await raw.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs j JOIN tickets t ON t.ticket = j.key AND t.tenant_id = '${FLOOR_TENANT}'`);
    if (kept.n !== recordsWarm + SUBMITS) throw new Error(`the submit records floor committed ${kept.n} tickets with jobs, not ${recordsWarm + SUBMITS}`);
    await raw.query(DROP_FLOOR_RECORDS);
    const tickets: string[] = [];
    const submitsPerSec = (await loadCalls(SUBMITS, CONCURRENCY, async () => tickets.push((await submit('async')).ticket))).rps;

    // Let the queue drain so polls read settled rows.
    for (const t of tickets.slice(-CONCURRENCY)) while (!['SUCCEEDED', 'FAILED'].includes((await poll(t, 5000)).status));

    // 2. Polls per second, against a raw SELECT of the same row and the floors of
    //    any gateway in front of it (HTTP -> SELECT; HTTP -> gRPC -> SELECT), interleaved halves.
    let [pollRate, rawRate, httpRate, grpcRate] = [0, 0, 0, 0];
    const ticketOf = (i: number) => tickets[i % tickets.length]!;
    for (let round = 0; round < 2; round++) {
      pollRate += (await loadCalls(POLLS / 2, CONCURRENCY, (i) => poll(ticketOf(i)))).rps;
      rawRate += (await loadCalls(POLLS / 2, CONCURRENCY, (i) => raw.query(POLL_SQL, [ticketOf(i)]))).rps;
      httpRate += (await loadCalls(POLLS / 2, CONCURRENCY, (i) => floor.get('sql', 'poll', ticketOf(i)))).rps;
      grpcRate += (await loadCalls(POLLS / 2, CONCURRENCY, (i) => floor.get('grpc', 'poll', ticketOf(i)))).rps;
    }

    // 3. Submit-to-done latency: sync, and async with a long poll.
    const sync: number[] = [];
    const async: number[] = [];
    for (let i = 0; i < LATENCY_RUNS; i++) {
      let t = performance.now();
      const r = await submit('sync');
      if (r.json.kind !== 'result') throw new Error('sync submit did not finish');
      sync.push(performance.now() - t);
      t = performance.now();
      const { ticket } = await submit('async');
      while ((await poll(ticket, 5000)).status !== 'SUCCEEDED');
      async.push(performance.now() - t);
    }
    sync.sort((a, b) => a - b);
    async.sort((a, b) => a - b);

    console.log('\n## contracts (analyze_portfolio through gateway → gRPC → core → queue worker)');
    console.log(`submits/s at concurrency ${CONCURRENCY} (async, ticket committed, its job added after): ${fmt(submitsPerSec, 0)}  floor (HTTP + gRPC + one INSERT committed): ${fmt(submitFloor, 0)}/s  records floor (the same, committing a submit's ticket, event and queue job): ${fmt(recordsFloor, 0)}/s`);
    console.log(`polls/s at concurrency ${CONCURRENCY}: ${fmt(pollRate / 2, 0)}  raw SELECT/s: ${fmt(rawRate / 2, 0)}  ratio: ${fmt(pollRate / rawRate, 3)}x`);
    console.log(`  floors: HTTP + SELECT ${fmt(httpRate / 2, 0)}/s (${fmt(httpRate / rawRate, 3)}x raw), HTTP + gRPC + SELECT ${fmt(grpcRate / 2, 0)}/s (${fmt(grpcRate / rawRate, 3)}x raw); ABC is ${fmt(pollRate / grpcRate, 3)}x the gRPC floor`);
    console.log(`submit-to-done sync:  p50 ${fmt(percentile(sync, 50), 1)} ms  p99 ${fmt(percentile(sync, 99), 1)} ms`);
    console.log(`submit-to-done async + long poll: p50 ${fmt(percentile(async, 50), 1)} ms  p99 ${fmt(percentile(async, 99), 1)} ms`);
    record({ bench: 'contracts', name: `submits per second, c=${CONCURRENCY}, durable`, value: submitsPerSec, unit: 'submits/s', ratio: submitsPerSec / submitFloor, against: 'HTTP + gRPC + one INSERT committed', goal: '>= 1,000' });
    record({ bench: 'contracts', name: 'submit floor: HTTP + gRPC + one INSERT committed', value: submitFloor, unit: 'submits/s' });
    record({ bench: 'contracts', name: 'submit records floor: HTTP + gRPC + a ticket, its event and its job committed', value: recordsFloor, unit: 'submits/s' });
    record({ bench: 'contracts', name: `submits per second, c=${CONCURRENCY}, vs the records floor`, value: submitsPerSec, unit: 'submits/s', ratio: submitsPerSec / recordsFloor, against: 'HTTP + gRPC + a ticket, its event and its job committed' });
    record({ bench: 'contracts', name: `polls per second, c=${CONCURRENCY}`, value: pollRate / 2, unit: 'polls/s', ratio: pollRate / rawRate, against: 'raw SELECT of the same row', goal: '>= 0.5x' });
    record({ bench: 'contracts', name: 'poll floor: HTTP + SELECT', value: httpRate / 2, unit: 'reads/s', ratio: httpRate / rawRate, against: 'raw SELECT of the same row' });
    record({ bench: 'contracts', name: 'poll floor: HTTP + gRPC + SELECT', value: grpcRate / 2, unit: 'reads/s', ratio: grpcRate / rawRate, against: 'raw SELECT of the same row' });
    record({ bench: 'contracts', name: 'polls per second against the gRPC floor', value: pollRate / 2, unit: 'polls/s', ratio: pollRate / grpcRate, against: 'HTTP + gRPC + SELECT, no ABC work' });
    record({ bench: 'contracts', name: 'sync submit-to-done p50', value: percentile(sync, 50), unit: 'ms' });
    record({ bench: 'contracts', name: 'async submit + long poll to done p50', value: percentile(async, 50), unit: 'ms' });
  } finally {
    floor.stop();
    await raw.end();
    await abc.stop();
    await db.close();
  }
}
