// The floor of a tool call's records, for bench/transitions: every row one
// echo call leaves (its tool_calls row, its idempotency key, its execution
// contract with its transition records and fact, and its run's events with
// their run and session counters moved), copied from a call ABC made and
// written straight to PostgreSQL in one commit per call, one prepared
// statement each. No ABC process, no HTTP, no policy, no reads: what the
// cluster alone allows for the records a call's moves keep.
import pg from 'pg';
import { columnsOf, insertFrom, templateId } from './records-floor.js';

const TABLES = ['tool_calls', 'idempotency_keys', 'execution_contracts', 'execution_transitions', 'memory'] as const;
type Table = (typeof TABLES)[number];
type Row = Record<string, unknown>;
interface Template {
  rows: Record<Table, Row[]>;
  events: Row[];
  run: string;
  session: string;
}

/** The rows tool call `id` left behind: its own, and the run's events from its first to its last. */
async function templateOf(pool: pg.Pool, id: string): Promise<Template> {
  const one = async (sql: string, params: unknown[]) => (await pool.query<{ rows: Row[] | null }>(`SELECT coalesce(jsonb_agg(to_jsonb(x)), '[]') AS rows FROM (${sql}) x`, params)).rows[0]!.rows ?? [];
  const [call] = await one('SELECT * FROM tool_calls WHERE tool_call_id = $1', [id]);
  if (!call) throw new Error(`a call floor copies tool call ${id}, and there is none`);
  const contracts = await one('SELECT * FROM execution_contracts WHERE subject_id = $1', [id]);
  const execution = contracts[0]!.execution_id as string;
  // The call's events: from its creation to its last state, in the run's order (other calls' are not in it: the bench's runs make one call at a time).
  const events = await one(
    `SELECT * FROM events WHERE run_id = $1 AND seq BETWEEN
       (SELECT min(seq) FROM events WHERE run_id = $1 AND payload->>'tool_call_id' = $2) AND (SELECT max(seq) FROM events WHERE run_id = $1 AND payload->>'tool_call_id' = $2) ORDER BY seq`,
    [call.run_id, id],
  );
  return {
    rows: {
      tool_calls: [call],
      idempotency_keys: await one("SELECT * FROM idempotency_keys WHERE scope = 'tool_call' AND key = $1", [call.idempotency_key]),
      execution_contracts: contracts,
      execution_transitions: await one('SELECT * FROM execution_transitions WHERE execution_id = $1 ORDER BY id', [execution]),
      memory: await one('SELECT * FROM memory WHERE key = $1', [`execution_fact:${execution}`]),
    },
    events,
    run: call.run_id as string,
    session: contracts[0]!.session_id as string,
  };
}

/**
 * One statement: each table's rows ($1..$5), and the events ($6) numbered
 * after the run's and the session's counters, moved as ABC's append moves
 * them ($7 run, $8 how many).
 */
function statementOf(columns: Record<Table, string[]>): string {
  const inserts = TABLES.map((t, i) => insertFrom(t, columns[t], i + 1));
  return `WITH ${inserts.join(',\n')},
    run AS (UPDATE runs SET last_seq = last_seq + $8 WHERE run_id = $7 RETURNING session_id, last_seq - $8 AS base),
    head AS (UPDATE sessions s SET event_head = s.event_head + $8 FROM run WHERE s.session_id = run.session_id RETURNING s.event_head - $8 AS base)
    INSERT INTO events (event_id, run_id, session_id, seq, session_seq, ts, type, payload)
    SELECT e.event_id, $7, run.session_id, run.base + e.n, head.base + e.n, e.ts, e.type, e.payload
      FROM jsonb_populate_recordset(null::events, $6::jsonb) WITH ORDINALITY AS e(id, event_id, run_id, session_id, seq, ts, type, payload, session_seq, n), run, head`;
}

export interface CallFloor {
  /** Rows one call writes. */
  rows: number;
  /** Writes call `i`'s records under fresh ids, on `run`, in one commit. */
  run(i: number, run: { runId: string; sessionId: string }): Promise<void>;
  end(): Promise<void>;
}

/** The tool call ABC completed last in `url`'s database. */
export const lastCall = (url: string) =>
  templateId(url, "SELECT tool_call_id AS id FROM tool_calls WHERE status = 'SUCCEEDED' ORDER BY completed_at DESC LIMIT 1", 'a call floor copies a completed tool call, and there is none');

/** A floor over `url`'s schema, copying the records of tool call `id`. */
export async function callFloor(url: string, id: string, concurrency: number): Promise<CallFloor> {
  const pool = new pg.Pool({ connectionString: url, max: concurrency });
  pool.on('error', () => {});
  const template = await templateOf(pool, id);
  const statement = { name: 'call_floor', text: statementOf(await columnsOf(pool, TABLES)) };
  // Every id of the template but its run's and session's, renamed per copy.
  const ids = new Set<string>([id, ...template.rows.idempotency_keys.map((k) => String(k.key))]);
  for (const r of template.rows.execution_contracts) ids.add(String(r.execution_id));
  for (const r of template.rows.memory) ids.add(String(r.memory_id));
  for (const e of template.events) ids.add(String(e.event_id));
  const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const pattern = new RegExp([...ids].sort((a, b) => b.length - a.length).map(escape).join('|'), 'g');
  const text = JSON.stringify({ rows: template.rows, events: template.events });
  const prefix = `f${process.pid}`;
  return {
    rows: Object.values(template.rows).reduce((n, rows) => n + rows.length, 0) + template.events.length,
    run: async (i, target) => {
      const copy = JSON.parse(
        text
          .replace(pattern, (found) => `${found}_${prefix}_${i}`)
          .replaceAll(template.run, target.runId)
          .replaceAll(template.session, target.sessionId),
      ) as Pick<Template, 'rows' | 'events'>;
      const values = TABLES.map((t) => JSON.stringify(copy.rows[t]));
      await pool.query({ ...statement, values: [...values, JSON.stringify(copy.events), target.runId, copy.events.length] });
    },
    end: () => pool.end(),
  };
}
