// The one transition writer of every state machine: it locks the row, checks
// the move against the machine's table (domain/machine.ts), writes the new
// state with the caller's columns, and may NOTIFY in the same statement. When
// the table lets a trigger leave one state only, the check can ride in the
// UPDATE itself (WHERE state = that state): one round trip instead of two.
// Each machine's own records (events, transition rows, mirrors) follow in the
// same transaction, written by the owner of its table; one may share the
// move's statement.
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError } from '../domain/errors.js';
import { transition, type Machine } from '../domain/machine.js';

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
}

export interface MoveOptions<S extends string> {
  /** The columns to read of the locked row (the state and key columns among them); all by default. */
  columns?: string;
  /** Picks the row: a WHERE clause and its parameters (`?` placeholders), and an ORDER BY when several match. */
  where: string;
  params: unknown[];
  order?: string;
  /** Columns set with the state: SQL fragments like `col = ?` and their parameters. */
  set?: (move: { from: S; to: S }) => { sql: string[]; params: unknown[] };
  /** NOTIFY `channel` with the value of `payload` (a column) when the move reaches a terminal state. */
  notifyOnEnd?: { channel: string; payload: string };
  /** Reads the written row back (`after`). */
  returning?: boolean;
  /** A record written by the same statement: a data-modifying CTE (`INSERT … SELECT … FROM moved`) over the written row. */
  also?: (move: { from: S; to: S }) => { sql: string; params: unknown[] };
  /**
   * When the trigger leaves a single state, move in one statement: UPDATE …
   * WHERE state = that state. No row matched: the locking read decides, as
   * without it. For callers that read of `row` only its state and columns the
   * move does not change.
   */
  oneStatement?: boolean;
}

/** Moves one row by `trigger` in `tx`; undefined when no row matches. An illegal move throws `illegal_transition`. */
export async function writeTransition<S extends string, T extends string, R extends object = Record<string, unknown>>(
  tx: EntityManager,
  t: MachineTable<S, T>,
  trigger: T,
  o: MoveOptions<S>,
): Promise<Move<S, R> | undefined> {
  const sole = o.oneStatement ? soleSource(t.machine, trigger) : undefined;
  const to = sole && transition(t.machine, sole, trigger);
  if (sole && to?.ok) {
    const pick = `(${t.key.join(', ')}) = (SELECT ${t.key.join(', ')} FROM ${t.table} WHERE ${o.where}${o.order ? ` ORDER BY ${o.order} LIMIT 1` : ''}) AND ${t.state} = ?`;
    const moved = await writeMove<S, T, R>(tx, t, o, { from: sole, to: to.value }, pick, [...o.params, sole]);
    if (moved) return moved;
  }
  const [row] = await tx.execute<R[]>(`SELECT ${o.columns ?? '*'} FROM ${t.table} WHERE ${o.where}${o.order ? ` ORDER BY ${o.order} LIMIT 1` : ''} FOR UPDATE`, o.params);
  if (!row) return undefined;
  const cell = (column: string) => (row as Record<string, unknown>)[column];
  const from = cell(t.state) as S;
  const next = transition(t.machine, from, trigger);
  if (!next.ok) throw illegalTransition(t.machine.name, t.key.map((k) => String(cell(k))).join('/'), from, trigger);
  return writeMove<S, T, R>(tx, t, o, { from, to: next.value, row }, t.key.map((k) => `${k} = ?`).join(' AND '), t.key.map(cell));
}

/** The UPDATE of a move (with its records and notification); undefined when `where` matched no row. */
async function writeMove<S extends string, T extends string, R extends object>(
  tx: EntityManager,
  t: MachineTable<S, T>,
  o: MoveOptions<S>,
  move: { from: S; to: S; row?: R },
  where: string,
  whereParams: unknown[],
): Promise<Move<S, R> | undefined> {
  const extra = o.set?.(move) ?? { sql: [], params: [] };
  const update = `UPDATE ${t.table} SET ${[`${t.state} = ?`, ...extra.sql].join(', ')} WHERE ${where}`;
  const params = [move.to, ...extra.params, ...whereParams];
  const also = o.also?.(move);
  const notify = o.notifyOnEnd && t.machine.isTerminal(move.to) ? o.notifyOnEnd : undefined;
  // Without the locked row, the written one says whether a row matched.
  const returning = o.returning || !move.row;
  let after: R | undefined;
  if (notify || also) {
    const with_ = [`moved AS (${update} RETURNING *)`, ...(also ? [`also AS (${also.sql})`] : [])].join(', ');
    const tail = notify ? `SELECT moved.*, pg_notify(?, moved.${notify.payload}) AS notified FROM moved` : 'SELECT * FROM moved';
    const rows = await tx.execute<(R & { notified?: unknown })[]>(`WITH ${with_} ${tail}`, [...params, ...(also?.params ?? []), ...(notify ? [notify.channel] : [])]);
    if (rows[0]) {
      const { notified: _, ...written } = rows[0];
      after = written as R;
    }
  } else if (returning) {
    [after] = await tx.execute<R[]>(`${update} RETURNING *`, params);
  } else {
    await tx.execute(update, params);
  }
  const row = move.row ?? (after && ({ ...after, [t.state]: move.from } as R));
  if (!row) return undefined;
  return { row, from: move.from, to: move.to, ...(o.returning && { after }) };
}

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
