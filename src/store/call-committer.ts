// Group commit of tool calls' one-statement commits (abc_open_tool_call,
// abc_move_tool_call): while one statement is in flight, the commits of every
// run queue up and go out together in the next, one commit for all. A call
// alone waits for nothing; sixteen at once cost one commit per round, and the
// calls of one run no longer wait behind each other's flush for the run's row.
import { channelFor, eventsOf, type EventRow } from './event-log.js';
import type { Queryable } from './native.js';
import { prepared } from './native.js';
import { toCall, type CallCommit, type RawCall } from './tool-call-store.js';

/** A call's commit: its open, its move, or its open and then its move (the move only when the open wrote). */
export interface CallWrite {
  open?: Record<string, unknown>;
  move?: Record<string, unknown>;
}

/** The most commits one statement carries; the rest wait for the next. */
const MAX_BATCH = 64;

type Written = RawCall & { appended: EventRow[] };

interface Waiting {
  write: CallWrite;
  resolve(commit: CallCommit | undefined): void;
  reject(error: unknown): void;
}

// Each element's open, then its move, in order: the lateral subquery keeps its
// volatile call per row, and the move is computed as that row is projected.
const BATCH = prepared(
  `SELECT o.r AS opened,
     CASE WHEN b.x->'move' IS NOT NULL AND (b.x->'open' IS NULL OR o.r IS NOT NULL) THEN abc_move_tool_call(b.x->'move', ?) END AS moved
   FROM jsonb_array_elements(?::jsonb) WITH ORDINALITY AS b(x, i)
   CROSS JOIN LATERAL (SELECT CASE WHEN b.x->'open' IS NOT NULL THEN abc_open_tool_call(b.x->'open', ?) END AS r) o
   ORDER BY b.i`,
);

/** Whether PostgreSQL answered `error` (a SQLSTATE): the statement's transaction rolled back, and nothing of it committed. */
const refusedByServer = (error: unknown): boolean => /^[0-9A-Z]{5}$/.test(String((error as { code?: unknown })?.code ?? ''));

/** Whether the statement refused with SQLSTATE ABC01: a row was not in the state its write expects. */
const isGuardRefusal = (error: unknown): boolean => (error as { code?: string })?.code === 'ABC01';

export class CallCommitter {
  readonly #pool: Queryable;
  readonly #origin: string;
  #waiting: Waiting[] = [];
  #running = false;

  /** `origin` names the process whose bus hands the events to its watchers (see channelFor); the statements notify no one. */
  constructor(pool: Queryable, origin: string) {
    this.#pool = pool;
    this.#origin = origin;
  }

  /**
   * Commits `write` in the next shared statement: the call as its last
   * function wrote it, with the events both appended; undefined when either
   * wrote nothing (or refused with ABC01: a row was not in the state the
   * write expects). A statement the database refuses is tried again one
   * commit at a time, so one refused commit does not fail the others.
   */
  commit(write: CallWrite): Promise<CallCommit | undefined> {
    const channel = channelFor(this.#origin);
    const quiet = (arg: Record<string, unknown> | undefined) => arg && { ...arg, channel };
    return new Promise((resolve, reject) => {
      this.#waiting.push({ write: { open: quiet(write.open), move: quiet(write.move) }, resolve, reject });
      if (!this.#running) {
        this.#running = true;
        queueMicrotask(() => void this.#run());
      }
    });
  }

  async #run(): Promise<void> {
    while (this.#waiting.length) {
      const group = this.#waiting.splice(0, MAX_BATCH);
      await this.#commit(group);
    }
    this.#running = false;
  }

  async #commit(group: Waiting[]): Promise<void> {
    let rows: { opened: Written | null; moved: Written | null }[];
    try {
      rows = (await this.#pool.query<{ opened: Written | null; moved: Written | null }>({ ...BATCH, values: [this.#origin, JSON.stringify(group.map((w) => w.write)), this.#origin] })).rows;
    } catch (error) {
      if (group.length > 1 && refusedByServer(error)) {
        for (const one of group) await this.#commit([one]);
      } else if (isGuardRefusal(error)) group[0]!.resolve(undefined);
      else for (const one of group) one.reject(error);
      return;
    }
    group.forEach((one, i) => one.resolve(commitOf(one.write, rows[i]!)));
  }
}

/** What a row of the statement says of its commit. */
function commitOf(write: CallWrite, row: { opened: Written | null; moved: Written | null }): CallCommit | undefined {
  if (write.open && !row.opened) return undefined;
  if (write.move && !row.moved) return undefined;
  const last = (row.moved ?? row.opened)!;
  return { call: toCall(last), events: [...(row.opened ? eventsOf(row.opened.appended) : []), ...(row.moved ? eventsOf(row.moved.appended) : [])] };
}
