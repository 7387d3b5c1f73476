// The one transition writer of every state machine: it locks the row, checks
// the move against the machine's table (domain/machine.ts), writes the new
// state with the caller's columns, and may NOTIFY in the same statement. Each
// machine's own records (events, transition rows, mirrors) follow in the same
// transaction, written by the owner of its table.
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
  /** The row as it was locked. */
  row: R;
  /** The row as written, when `returning` was asked. */
  after?: R;
  from: S;
  to: S;
}

export interface MoveOptions<S extends string, R> {
  /** The columns to read of the locked row (the state and key columns among them); all by default. */
  columns?: string;
  /** Picks the row: a WHERE clause and its parameters (`?` placeholders), and an ORDER BY when several match. */
  where: string;
  params: unknown[];
  order?: string;
  /** Columns set with the state: SQL fragments like `col = ?` and their parameters. */
  set?: (move: Move<S, R>) => { sql: string[]; params: unknown[] };
  /** NOTIFY `channel` with the value of `payload` (a column) when the move reaches a terminal state. */
  notifyOnEnd?: { channel: string; payload: string };
  /** Reads the written row back (`after`). */
  returning?: boolean;
}

/** Moves one row by `trigger` in `tx`; undefined when no row matches. An illegal move throws `illegal_transition`. */
export async function writeTransition<S extends string, T extends string, R extends object = Record<string, unknown>>(
  tx: EntityManager,
  t: MachineTable<S, T>,
  trigger: T,
  o: MoveOptions<S, R>,
): Promise<Move<S, R> | undefined> {
  const [row] = await tx.execute<R[]>(`SELECT ${o.columns ?? '*'} FROM ${t.table} WHERE ${o.where}${o.order ? ` ORDER BY ${o.order} LIMIT 1` : ''} FOR UPDATE`, o.params);
  if (!row) return undefined;
  const cell = (column: string) => (row as Record<string, unknown>)[column];
  const from = cell(t.state) as S;
  const next = transition(t.machine, from, trigger);
  if (!next.ok) throw illegalTransition(t.machine.name, t.key.map((k) => String(cell(k))).join('/'), from, trigger);
  const move: Move<S, R> = { row, from, to: next.value };
  const extra = o.set?.(move) ?? { sql: [], params: [] };
  const update = `UPDATE ${t.table} SET ${[`${t.state} = ?`, ...extra.sql].join(', ')} WHERE ${t.key.map((k) => `${k} = ?`).join(' AND ')}`;
  const params = [next.value, ...extra.params, ...t.key.map(cell)];
  if (o.notifyOnEnd && t.machine.isTerminal(next.value)) {
    await tx.execute(`WITH moved AS (${update} RETURNING ${o.notifyOnEnd.payload} AS payload) SELECT pg_notify(?, payload) FROM moved`, [...params, o.notifyOnEnd.channel]);
  } else if (o.returning) {
    [move.after] = await tx.execute<R[]>(`${update} RETURNING *`, params);
  } else {
    await tx.execute(update, params);
  }
  return move;
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
