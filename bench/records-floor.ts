// The floor of a contract's records, for bench/durable: every row one
// analyze_portfolio contract leaves (its ticket, frozen plan, steps, execution
// contracts and their transitions, snapshots, memory facts and events), copied
// from a contract ABC ran and written straight to PostgreSQL in as many commits
// as DBOS makes for the same eight units (ten: the ticket, its plan, one per
// unit), or as ABC makes (three: the admission, the plan, the rest), each commit
// one prepared statement; the commit with the success case drops the intent's
// older ones, as ABC's final move does. No ABC process, no unit work, no reads.
import pg from 'pg';
import { successCasesTrim } from '../src/store/memory.js';

const TABLES = ['tickets', 'frozen_plans', 'ticket_steps', 'execution_contracts', 'execution_transitions', 'snapshots', 'memory', 'ticket_events'] as const;
type Table = (typeof TABLES)[number];
type Rows = Record<Table, Record<string, unknown>[]>;

/** Commits per contract: DBOS's for an 8-step workflow (its status row, a checkpoint per step, its end). */
export const FLOOR_COMMITS = 10;
/** Commits per contract: ABC's for a sync contract its core runs (its admission with its plan, every batch with the packaging). */
export const ABC_COMMITS = 2;

/** The rows `ticket` left behind, table by table. */
async function rowsOf(pool: pg.Pool, ticket: string): Promise<Rows> {
  const one = async (sql: string, params: unknown[]) => (await pool.query<{ rows: Record<string, unknown>[] | null }>(`SELECT coalesce(jsonb_agg(to_jsonb(x)), '[]') AS rows FROM (${sql}) x`, params)).rows[0]!.rows ?? [];
  const contracts = await one('SELECT * FROM execution_contracts WHERE ticket = $1', [ticket]);
  const executions = contracts.map((c) => c.execution_id as string);
  return {
    tickets: await one('SELECT * FROM tickets WHERE ticket = $1', [ticket]),
    frozen_plans: await one('SELECT * FROM frozen_plans WHERE ticket = $1', [ticket]),
    ticket_steps: await one('SELECT * FROM ticket_steps WHERE ticket = $1', [ticket]),
    execution_contracts: contracts,
    execution_transitions: await one('SELECT * FROM execution_transitions WHERE execution_id = ANY($1) ORDER BY id', [executions]),
    snapshots: await one('SELECT * FROM snapshots WHERE ticket = $1', [ticket]),
    // The session's facts of its steps, and the intent's success entry it added to GLOBAL memory.
    memory: await one(
      `SELECT * FROM memory WHERE key = ANY(SELECT 'execution_fact:' || unnest($1::text[]))
       UNION ALL (SELECT * FROM memory WHERE scope = 'GLOBAL' AND created_at <= (SELECT finished_at FROM tickets WHERE ticket = $2) ORDER BY created_at DESC LIMIT 1)`,
      [executions, ticket],
    ),
    ticket_events: await one('SELECT * FROM ticket_events WHERE ticket = $1 ORDER BY seq', [ticket]),
  };
}

/** The columns a copy of each of `tables` writes: all but identities and generated ones. */
export async function columnsOf<T extends string>(pool: pg.Pool, tables: readonly T[]): Promise<Record<T, string[]>> {
  const { rows } = await pool.query<{ table_name: T; column_name: string }>(
    `SELECT table_name, column_name FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name = ANY($1) AND is_generated = 'NEVER' AND is_identity = 'NO' AND coalesce(column_default, '') NOT LIKE 'nextval(%'
      ORDER BY ordinal_position`,
    [tables],
  );
  const columns = Object.fromEntries(tables.map((t) => [t, [] as string[]])) as Record<T, string[]>;
  for (const r of rows) columns[r.table_name].push(r.column_name);
  return columns;
}

/** `INSERT INTO table (columns) SELECT columns FROM jsonb_populate_recordset(null::table, $param)`, as a CTE named i_table. */
export function insertFrom(table: string, columns: string[], param: number): string {
  const list = columns.map((c) => `"${c}"`).join(', ');
  return `i_${table} AS (INSERT INTO ${table} (${list}) SELECT ${list} FROM jsonb_populate_recordset(null::${table}, $${param}::jsonb))`;
}

/**
 * One statement inserting each table's share ($1..$8) and moving the ticket's
 * event counter ($9 ticket, $10 events); with `trim` (its parameters from $11),
 * the one that also drops the older success cases, as ABC's final move does.
 */
function statementOf(columns: Record<Table, string[]>, trim?: string): string {
  const inserts = TABLES.map((t, i) => insertFrom(t, columns[t], i + 1));
  return `WITH ${[...inserts, ...(trim ? [`trim AS (${trim})`] : [])].join(',\n')}
    UPDATE tickets SET event_seq = event_seq + $10, updated_at = now() WHERE ticket = $9`;
}

/** A memory row that is a success case (GLOBAL, `success:<intent>:<ticket>`). */
const isSuccessCase = (r: Record<string, unknown>) => r.scope === 'GLOBAL' && String(r.key).startsWith('success:');

/**
 * ABC's trim of the GLOBAL success cases of the template's intent
 * (successCasesTrim), numbered from $11: a floor that left its copies of the
 * success case in memory would leave ABC's next contracts to search them all
 * and to drop them, and measure ABC's work against less than its own.
 */
function trimOf(template: Rows): { sql: string; params: unknown[] } | undefined {
  const success = template.memory.find(isSuccessCase);
  if (!success) return undefined;
  const trim = successCasesTrim(String(success.tenant_id), String(success.key).split(':')[1]!);
  let n = 10;
  return { sql: trim.sql.replace(/\?/g, () => `$${++n}`), params: trim.params };
}

/** `items` in `n` consecutive shares, as even as they go. */
function shares<T>(items: T[], n: number): T[][] {
  return Array.from({ length: n }, (_, k) => items.slice(Math.floor((k * items.length) / n), Math.floor(((k + 1) * items.length) / n)));
}

export interface RecordsFloor {
  /** Rows one contract writes. */
  rows: number;
  /** Writes one contract's records under fresh ids, in its number of commits. */
  run(i: number): Promise<void>;
  /** The same, as each commit's write in order, for a caller that works between them. */
  commits(i: number): (() => Promise<void>)[];
  end(): Promise<void>;
}

/** The first column of `sql`'s one row in `url`'s database: a floor's template, taken before any floor writes its copies. */
export async function templateId(url: string, sql: string, missing: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const [row] = (await client.query<{ id: string }>(sql)).rows;
    if (!row) throw new Error(missing);
    return row.id;
  } finally {
    await client.end();
  }
}

/** The contract ABC completed last in `url`'s database. */
export const lastContract = (url: string) =>
  templateId(url, "SELECT ticket AS id FROM tickets WHERE lifecycle_state = 'COMPLETED' ORDER BY finished_at DESC LIMIT 1", 'a records floor copies a completed contract, and there is none');

/** A floor over `url`'s schema, copying the records of contract `ticket`, in `count` commits (at least 2). */
export async function recordsFloor(url: string, ticket: string, concurrency: number, count = FLOOR_COMMITS): Promise<RecordsFloor> {
  const pool = new pg.Pool({ connectionString: url, max: concurrency });
  pool.on('error', () => {});
  const template = await rowsOf(pool, ticket);
  const columns = await columnsOf(pool, TABLES);
  const statement = { name: 'records_floor', text: statementOf(columns) };
  const trim = trimOf(template);
  const trimming = trim && { name: 'records_floor_trim', text: statementOf(columns, trim.sql) };
  // Every id of the template, renamed per copy; the GLOBAL entry's key with it.
  const ids = new Set<string>([ticket]);
  for (const r of template.tickets) for (const k of ['request_id', 'idempotency_key', 'plan_id']) if (r[k]) ids.add(String(r[k]));
  for (const r of template.frozen_plans) ids.add(String(r.plan_id));
  for (const r of template.execution_contracts) ids.add(String(r.execution_id));
  for (const r of template.snapshots) ids.add(String(r.snapshot_id));
  for (const r of template.memory) {
    ids.add(String(r.memory_id));
    if (r.scope === 'GLOBAL') ids.add(String(r.key));
  }
  const pattern = new RegExp([...ids].sort((a, b) => b.length - a.length).map((id) => id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
  const text = JSON.stringify(template);
  const prefix = `f${process.pid}`;
  // The commits: the ticket first (with its submit's event); its plan, steps and
  // contracts (in two commits, with the ticket); then a share of the
  // transitions, snapshots, facts and events per unit.
  if (count < 2) throw new Error('the records of a contract take two commits at least');
  const perUnit = Math.max(1, count - 2);
  const plan = (rows: Rows): Partial<Rows>[] => {
    const unit = { transitions: shares(rows.execution_transitions, perUnit), snapshots: shares(rows.snapshots, perUnit), memory: shares(rows.memory, perUnit), events: shares(rows.ticket_events.slice(1), perUnit + 1) };
    const admission = { tickets: rows.tickets, ticket_events: rows.ticket_events.slice(0, 1) };
    const planned = { frozen_plans: rows.frozen_plans, ticket_steps: rows.ticket_steps, execution_contracts: rows.execution_contracts, ticket_events: unit.events[0] };
    const head = count === 2 ? [{ ...admission, ...planned, ticket_events: [...admission.ticket_events, ...planned.ticket_events!] }] : [admission, planned];
    return [...head, ...Array.from({ length: perUnit }, (_, k) => ({ execution_transitions: unit.transitions[k], snapshots: unit.snapshots[k], memory: unit.memory[k], ticket_events: unit.events[k + 1] }))];
  };
  const commits = (i: number) => {
    const copy = JSON.parse(text.replace(pattern, (id) => `${id}_${prefix}_${i}`)) as Rows;
    // Written now, as ABC writes its memory: the trim keeps the newest cases by this time.
    const now = new Date().toISOString();
    for (const r of copy.memory) r.created_at = now;
    const copyTicket = `${ticket}_${prefix}_${i}`;
    return plan(copy).map((commit) => async () => {
      const values = [...TABLES.map((t) => JSON.stringify(commit[t] ?? [])), copyTicket, commit.ticket_events?.length ?? 0];
      // The commit that writes the success case drops the older ones with it.
      const success = trimming && commit.memory?.some(isSuccessCase);
      await pool.query(success ? { ...trimming, values: [...values, ...trim.params] } : { ...statement, values });
    });
  };
  return {
    rows: Object.values(template).reduce((n, rows) => n + rows.length, 0),
    run: async (i) => {
      for (const commit of commits(i)) await commit();
    },
    commits,
    end: () => pool.end(),
  };
}
