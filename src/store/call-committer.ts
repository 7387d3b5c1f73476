// Group commit of tool calls' one-statement commits (abc_open_tool_call,
// abc_move_tool_call): while one statement is in flight, the commits of every
// run queue up and go out together in the next, one commit for all. A call
// alone waits for nothing; sixteen at once cost one commit per round, and the
// calls of one run no longer wait behind each other's flush for the run's row.
import { fulfilled, GroupCommit, oneByOne, type Outcome } from '../runtime/group-commit.js';
import { channelFor, numberedEvents, type Numbered, type SentEvent } from './event-log.js';
import { isGuardRefusal, prepared, refusedByServer, type Queryable } from './native.js';
import { toCall, type CallCommit, type RawCall } from './tool-call-store.js';

/** A call's commit: its open (through its end, for a call that ended first), or a move. */
export type CallWrite = { open: Record<string, unknown>; move?: never } | { move: Record<string, unknown>; open?: never };

/**
 * A call as its function wrote it, with what the database assigned each of its
 * events, in the order sent (id, seq, session_seq, and the stored payload where
 * the database completed it), and the run's session. Every write asks for this
 * answer (`numbered`, migration numbered_call_events).
 */
type Written = RawCall & { numbered: Numbered[]; session_id: string };
type Row = { opened: Written | null; moved: Written | null };

// Each element's open or move, in the order of the array.
const BATCH = prepared(
  `SELECT CASE WHEN b.x->'open' IS NOT NULL THEN abc_open_tool_call(b.x->'open', ?) END AS opened,
     CASE WHEN b.x->'move' IS NOT NULL THEN abc_move_tool_call(b.x->'move', ?) END AS moved
   FROM jsonb_array_elements(?::jsonb) WITH ORDINALITY AS b(x, i)
   ORDER BY b.i`,
);

export class CallCommitter {
  readonly #pool: Queryable;
  readonly #origin: string;
  readonly #group = new GroupCommit<CallWrite, CallCommit | undefined>((writes) => this.#commit(writes));

  /** `origin` names the process whose bus hands the events to its watchers (see channelFor); the statements then notify no one. */
  constructor(pool: Queryable, origin: string) {
    this.#pool = pool;
    this.#origin = origin;
  }

  /**
   * Commits `write` in the next shared statement: the call as its function
   * wrote it, with the events it appended; undefined when it wrote nothing
   * (or refused with ABC01: a row was not in the state the write expects).
   * A statement the database refuses is tried again one commit at a time,
   * so one refused commit does not fail the others.
   */
  commit(write: CallWrite): Promise<CallCommit | undefined> {
    const channel = channelFor(this.#origin);
    return this.#group.add(write.open ? { open: { ...write.open, channel } } : { move: { ...write.move, channel } });
  }

  /** A group in one statement; when the database refuses it, each alone, so one refused commit fails no other. */
  async #commit(writes: CallWrite[]): Promise<Outcome<CallCommit | undefined>[]> {
    if (writes.length === 1) return oneByOne(writes, (w) => this.#alone(w));
    try {
      return fulfilled(await this.#statement(writes));
    } catch (error) {
      if (refusedByServer(error)) return oneByOne(writes, (w) => this.#alone(w));
      throw error;
    }
  }

  /** One commit in its own statement: undefined when the row refused it (ABC01). */
  async #alone(write: CallWrite): Promise<CallCommit | undefined> {
    try {
      return (await this.#statement([write]))[0];
    } catch (error) {
      if (isGuardRefusal(error)) return undefined;
      throw error;
    }
  }

  async #statement(writes: CallWrite[]): Promise<(CallCommit | undefined)[]> {
    const json = JSON.stringify(writes);
    const { rows } = await this.#pool.query<Row>({ ...BATCH, values: [this.#origin, this.#origin, json] });
    // The rest of each event is what was sent, its payload as JSON gives it back, as a read of the log would.
    const sent = JSON.parse(json) as CallWrite[];
    return writes.map((w, i) => commitOf(w, rows[i]!, (sent[i]!.open ?? sent[i]!.move)!.events as SentEvent[]));
  }
}

/** What a row of the statement says of its commit. */
function commitOf(write: CallWrite, row: Row, sent: SentEvent[]): CallCommit | undefined {
  const written = write.open ? row.opened : row.moved;
  if (!written) return undefined;
  return { call: toCall(written), events: numberedEvents(sent, written.session_id, written.numbered) };
}
