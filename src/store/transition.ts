// The one transition writer of every state machine: it locks the row, checks
// the move against the machine's table (domain/machine.ts), writes the new
// state with the caller's columns, and may NOTIFY in the same statement. When
// the table lets a trigger leave one state only, or the caller names the state
// it expects, the check can ride in the UPDATE itself (WHERE state = that
// state): one round trip instead of two. A move may take several hops, each
// checked by the table, and write the row once. Each machine's own records
// (events, transition rows, mirrors) follow in the same transaction, written
// by the owner of its table; they may share the move's statement.
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError } from '../domain/errors.js';
import { transition, type Machine } from '../domain/machine.js';
import { executeOne } from './native.js';

export interface MachineTable<S extends string, T extends string> {
  machine: Machine<S, T>;
  table: string;
  /** The state column. */
  state: string;
  /** The primary-key columns, to update the row that was locked. */
  key: readonly string[];
}

export interface Move<S extends string, R> {
  /** The row as it was locked; after a one-statement move, the written row with its former state. */
  row: R;
  /** The row as written, when `returning` was asked. */
  after?: R;
  from: S;
  to: S;
  /** Each transition the move made, in order: one, or one per trigger of `through` and the last. */
  hops: Hop<S>[];
}

export interface Hop<S extends string> {
  from: S;
  to: S;
  trigger: string;
}

export interface MoveOptions<S extends string, T extends string = string> {
  /** The columns to read of the locked row (the state and key columns among them); all by default. */
  columns?: string;
  /** Picks the row: a WHERE clause and its parameters (`?` placeholders), and an ORDER BY when several match. */
  where: string;
  params: unknown[];
  order?: string;
  /** Columns set with the state: SQL fragments like `col = ?` and their parameters. */
  set?: (move: Path<S>) => { sql: string[]; params: unknown[] };
  /** NOTIFY `channel` with the value of `payload` (a column) when the move reaches a terminal state. */
  notifyOnEnd?: { channel: string; payload: string };
  /** NOTIFY `channel` with the value of `payload` (a column) on every move. */
  notify?: { channel: string; payload: string };
  /** Functions the statement calls once with the written row (`moved`), after the write: expressions whose values are dropped. */
  calls?: { sql: string; params: unknown[] }[];
  /** Reads the written row back (`after`). */
  returning?: boolean;
  /** Records written by the same statement: data-modifying CTEs (`INSERT … SELECT … FROM moved`) over the written row. */
  also?: (move: Path<S>) => { sql: string; params: unknown[] } | { sql: string; params: unknown[] }[];
  /**
   * When the trigger leaves a single state, move in one statement: UPDATE …
   * WHERE state = that state. No row matched: the locking read decides, as
   * without it. For callers that read of `row` only its state and columns the
   * move does not change.
   */
  oneStatement?: boolean;
  /** The state the caller expects the row in: with `oneStatement`, a trigger that leaves several states moves in one statement from this one. */
  from?: S;
  /**
   * Triggers taken before `trigger`, in the same write: each hop is checked
   * against the table in turn and the row is written once, in the last state.
   */
  through?: T[];
  /** Move only a row in this state, in one statement: undefined, with no locking read, for a row in another. */
  onlyFrom?: S;
  /** Outside a transaction, send the move as a prepared statement (native.ts: every parameter takes its type from its place). */
  prepared?: boolean;
  /**
   * Creates the row instead, in the state the path from `from` reaches: an
   * INSERT of these columns (SQL values and their parameters), which does
   * nothing on a conflict with `conflict` (a unique key's columns). Undefined
   * then, and the move's records are not written either.
   */
  create?: { from: S; conflict: string; columns: (move: Path<S>) => { names: string[]; values: string[]; params: unknown[] } };
}

/** Where a move goes: its first state, its last, and each hop between. */
export interface Path<S extends string> {
  from: S;
  to: S;
  hops: Hop<S>[];
}

/**
 * Moves one row by `trigger` in `tx`; undefined when no row matches. An illegal
 * move throws `illegal_transition`. Outside a transaction, a move that cannot
 * go in one statement takes its locking read and write in one.
 */
export async function writeTransition<S extends string, T extends string, R extends object = Record<string, unknown>>(
  tx: EntityManager,
  t: MachineTable<S, T>,
  trigger: T,
  o: MoveOptions<S, T>,
): Promise<Move<S, R> | undefined> {
  const triggers = [...(o.through ?? []), trigger];
  if (o.create) {
    const path = pathOf(t, o.create.from, triggers);
    if (!path.ok) throw illegalTransition(t.machine.name, o.params.join('/'), path.from, path.trigger);
    return writeMove<S, T, R>(tx, t, o, path.value, '', []);
  }
  const pick = `(${t.key.join(', ')}) = (SELECT ${t.key.join(', ')} FROM ${t.table} WHERE ${o.where}${o.order ? ` ORDER BY ${o.order} LIMIT 1` : ''}) AND ${t.state} = ?`;
  if (o.onlyFrom) {
    const path = pathOf(t, o.onlyFrom, triggers);
    if (!path.ok) throw illegalTransition(t.machine.name, o.params.join('/'), path.from, path.trigger);
    return writeMove<S, T, R>(tx, t, o, path.value, pick, [...o.params, o.onlyFrom]);
  }
  const sole = o.oneStatement ? (o.from ?? soleSource(t.machine, triggers[0]!)) : undefined;
  const path = sole && pathOf(t, sole, triggers);
  if (sole && path?.ok) {
    const moved = await writeMove<S, T, R>(tx, t, o, path.value, pick, [...o.params, sole]);
    if (moved) return moved;
  }
  if (!tx.isInTransaction()) return tx.transactional((inner) => lockAndMove<S, T, R>(inner, t, triggers, o));
  return lockAndMove<S, T, R>(tx, t, triggers, o);
}

/** The move after a locking read of the row: its state decides. */
async function lockAndMove<S extends string, T extends string, R extends object>(tx: EntityManager, t: MachineTable<S, T>, triggers: T[], o: MoveOptions<S, T>): Promise<Move<S, R> | undefined> {
  const [row] = await tx.execute<R[]>(`SELECT ${o.columns ?? '*'} FROM ${t.table} WHERE ${o.where}${o.order ? ` ORDER BY ${o.order} LIMIT 1` : ''} FOR UPDATE`, o.params);
  if (!row) return undefined;
  const cell = (column: string) => (row as Record<string, unknown>)[column];
  const path = pathOf(t, cell(t.state) as S, triggers);
  if (!path.ok) throw illegalTransition(t.machine.name, t.key.map((k) => String(cell(k))).join('/'), path.from, path.trigger);
  return writeMove<S, T, R>(tx, t, o, { ...path.value, row }, t.key.map((k) => `${k} = ?`).join(' AND '), t.key.map(cell));
}

/** The hops `triggers` take from `from`, each by the machine's table; the first refused when one is. */
function pathOf<S extends string, T extends string>(t: MachineTable<S, T>, from: S, triggers: T[]): { ok: true; value: Path<S> } | { ok: false; from: S; trigger: T } {
  const hops: Hop<S>[] = [];
  let state = from;
  for (const trigger of triggers) {
    const next = transition(t.machine, state, trigger);
    if (!next.ok) return { ok: false, from: state, trigger };
    hops.push({ from: state, to: next.value, trigger });
    state = next.value;
  }
  return { ok: true, value: { from, to: state, hops } };
}

/** The UPDATE (or INSERT) of a move, with its records and notification; undefined when `where` matched no row (or the row to create was there). */
async function writeMove<S extends string, T extends string, R extends object>(
  tx: EntityManager,
  t: MachineTable<S, T>,
  o: MoveOptions<S, T>,
  move: Path<S> & { row?: R },
  where: string,
  whereParams: unknown[],
): Promise<Move<S, R> | undefined> {
  const path: Path<S> = { from: move.from, to: move.to, hops: move.hops };
  const extra = o.set?.(path) ?? { sql: [], params: [] };
  const created = o.create?.columns(path);
  const update = created
    ? `INSERT INTO ${t.table} (${[t.state, ...created.names].join(', ')}) VALUES (${['?', ...created.values].join(', ')}) ON CONFLICT ${o.create!.conflict} DO NOTHING`
    : `UPDATE ${t.table} SET ${[`${t.state} = ?`, ...extra.sql].join(', ')} WHERE ${where}`;
  const params = created ? [move.to, ...created.params] : [move.to, ...extra.params, ...whereParams];
  const also = [o.also?.(path) ?? []].flat();
  const notices = [...(o.notify ? [o.notify] : []), ...(o.notifyOnEnd && t.machine.isTerminal(move.to) ? [o.notifyOnEnd] : [])];
  // Without the locked row, the written one says whether a row matched.
  const returning = o.returning || !move.row;
  let after: R | undefined;
  const calls = [...notices.map((n) => ({ sql: `pg_notify(?, moved.${n.payload})`, params: [n.channel] })), ...(o.calls ?? [])];
  if (also.length || calls.length) {
    const with_ = [`moved AS (${update} RETURNING *)`, ...also.map((a, i) => `also${i} AS (${a.sql})`)].join(', ');
    // On its own (autocommitted), a move whose row had moved on refuses, and its other records are not written either.
    // So does a creation, also in a transaction, which its refusal then aborts.
    const guarded = also.length > 0 && !move.row && (!tx.isInTransaction() || created !== undefined);
    const from = guarded ? `(SELECT 1) AS one LEFT JOIN moved ON true WHERE abc_moved(moved.${t.key[0]} IS NOT NULL)` : 'moved';
    const statement = `WITH ${with_} SELECT ${['moved.*', ...calls.map((c, i) => `${c.sql} AS called${i}`)].join(', ')} FROM ${from}`;
    const values = [...params, ...also.flatMap((a) => a.params), ...calls.flatMap((c) => c.params)];
    const run = () => (o.prepared ? executeOne<Record<string, unknown>>(tx, statement, values) : tx.execute<Record<string, unknown>[]>(statement, values));
    const rows = guarded && !tx.isInTransaction() ? ((await run().catch((error: unknown) => (isMovedOn(error) ? [] : Promise.reject(error)))) as Record<string, unknown>[]) : await run();
    if (rows[0]) {
      const written = { ...rows[0] };
      for (let i = 0; i < calls.length; i++) delete written[`called${i}`];
      after = written as R;
    }
  } else if (returning) {
    [after] = await tx.execute<R[]>(`${update} RETURNING *`, params);
  } else {
    await tx.execute(update, params);
  }
  const row = move.row ?? (after && ({ ...after, [t.state]: move.from } as R));
  if (!row) return undefined;
  return { row, from: move.from, to: move.to, hops: move.hops, ...(o.returning && { after }) };
}

/** abc_moved's refusal (SQLSTATE ABC02): the move's row was not in its state, and the statement wrote nothing. */
const isMovedOn = (error: unknown): boolean => (error as { code?: string }).code === 'ABC02';

const sources = new WeakMap<object, Map<string, string | undefined>>();
/** The one state `trigger` leaves in `machine`'s table, if there is exactly one. */
function soleSource<S extends string, T extends string>(machine: Machine<S, T>, trigger: T): S | undefined {
  let bySource = sources.get(machine);
  if (!bySource) sources.set(machine, (bySource = new Map()));
  if (!bySource.has(trigger)) {
    const from = machine.states.filter((s) => machine.transitions[s][trigger] !== undefined);
    bySource.set(trigger, from.length === 1 ? from[0] : undefined);
  }
  return bySource.get(trigger) as S | undefined;
}

/** The one error for a move the machine's table does not allow. */
export function illegalTransition(machine: string, subject: string, from: string, trigger: string): AbcError {
  return new AbcError('FAILED_PRECONDITION', {
    code: 'illegal_transition',
    message: `${machine} ${subject} is ${from}; "${trigger}" is not allowed`,
    retryable: false,
    details: { machine, from, trigger },
  });
}

/** Whether `error` is a move that lost a race: another writer moved the row first. */
export const isIllegalTransition = (error: unknown): boolean => error instanceof AbcError && error.payload.code === 'illegal_transition';
