// The only writer of contract execution state. Every lifecycle and step
// transition goes through the machines' pure transition(), and commits with
// its ticket event and a NOTIFY in one transaction.
import type { EntityManager } from '@mikro-orm/postgresql';
import type pg from 'pg';
import {
  CONTRACT_LIFECYCLE_MACHINE,
  CONTRACT_STEP_MACHINE,
  PHASE_OF,
  statusOf,
  type LifecycleState,
  type LifecycleTrigger,
  type Phase,
  type StepState,
  type StepTrigger,
} from '../domain/contract-lifecycle.machine.js';
import { AbcError } from '../domain/errors.js';
import type { ExecutionTrigger } from '../domain/execution-contract.machine.js';
import { writeTransition, type MachineTable, type Path } from './transition.js';
import { moveContract, openContract, summariseOutcome } from './execution-contracts.js';
import { CANCEL_CHANNEL, TICKET_ENDED_CHANNEL, TICKETS_CHANNEL } from './event-bus.js';
import { executeOne, inJsonList, prepared, type Queryable } from './native.js';

/** A timestamp column as read: a Date through the ORM, text from its pool (native.ts); read it with `new Date(…)`. */
export type Timestamp = Date | string;

export interface TicketRow {
  ticket: string;
  tenant_id: string;
  contract_id: string;
  contract_version: string;
  request_id: string;
  session_id: string;
  idempotency_key: string;
  request_hash: string;
  request: Record<string, unknown>;
  mode: string;
  status: string;
  phase: Phase;
  lifecycle_state: LifecycleState;
  plan_id: string | null;
  assembly_id: string | null;
  assembly_version: string | null;
  expected_latency_ms: number;
  partial_result: Record<string, unknown> | null;
  result: Record<string, unknown> | null;
  error: Record<string, unknown> | null;
  warnings: string[] | null;
  next_ticket: string | null;
  artifact: string | null;
  artifact_media_type: string | null;
  trace_id: string;
  /** The traceparent of the span that submitted it; the engine's passes continue under it. */
  traceparent: string | null;
  /** The engine's execution record (counters, batch, human request, ...). */
  engine: Record<string, unknown>;
  human_deadline: Timestamp | null;
  lease_owner: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  expires_at: Timestamp;
}

export interface StepRow {
  ticket: string;
  step_id: string;
  position: number;
  label: string;
  capability: string;
  side_effect: boolean;
  status: StepState;
  output: unknown;
  message: string | null;
  started_at: Timestamp | null;
  ended_at: Timestamp | null;
}

/** Columns a lifecycle transition may set alongside the state. */
export interface TicketPatch {
  plan_id?: string;
  assembly_id?: string;
  assembly_version?: string;
  partial_result?: Record<string, unknown> | null;
  result?: Record<string, unknown>;
  error?: Record<string, unknown>;
  warnings?: string[];
  artifact?: string;
  artifact_media_type?: string;
  engine?: Record<string, unknown>;
  human_deadline?: Date | null;
  /** A worker's claim, taken with the move. */
  lease?: { owner: string; ms: number };
}

const TICKETS: MachineTable<LifecycleState, LifecycleTrigger> = { machine: CONTRACT_LIFECYCLE_MACHINE, table: 'tickets', state: 'lifecycle_state', key: ['ticket'] };
const STEPS: MachineTable<StepState, StepTrigger> = { machine: CONTRACT_STEP_MACHINE, table: 'ticket_steps', state: 'status', key: ['ticket', 'step_id'] };

const PATCH_COLUMNS: (keyof TicketPatch)[] = ['plan_id', 'assembly_id', 'assembly_version', 'partial_result', 'result', 'error', 'warnings', 'artifact', 'artifact_media_type', 'engine', 'human_deadline'];
const JSON_COLUMNS = new Set<keyof TicketPatch>(['partial_result', 'result', 'error', 'warnings']);
const JSONB_COLUMNS = new Set<keyof TicketPatch>(['engine']);

export async function getTicket(em: EntityManager, ticket: string, lock = false): Promise<TicketRow | undefined> {
  const [row] = await em.execute<TicketRow[]>(`SELECT * FROM tickets WHERE ticket = ? ${lock ? 'FOR UPDATE' : ''}`, [ticket]);
  return row;
}

/** Where a ticket's lifecycle stands, without its documents: what a waiter checks on each wake. */
export async function getTicketState(em: EntityManager, ticket: string): Promise<Pick<TicketRow, 'lifecycle_state' | 'status'> | undefined> {
  const [row] = await executeOne<Pick<TicketRow, 'lifecycle_state' | 'status'>>(em, 'SELECT lifecycle_state, status FROM tickets WHERE ticket = ?', [ticket]);
  return row;
}

export async function getSteps(em: EntityManager, ticket: string): Promise<StepRow[]> {
  return executeOne<StepRow>(em, 'SELECT * FROM ticket_steps WHERE ticket = ? ORDER BY position', [ticket]);
}

export interface TicketEventInput {
  type: string;
  payload: Record<string, unknown>;
}

/**
 * Appends progress and trace events in order and wakes every poller of the
 * ticket (after commit), in one statement: bumping the ticket's event counter
 * takes its row lock, which orders the events of parallel steps (gap-free seq).
 */
export async function appendTicketEvents(tx: EntityManager, ticket: string, events: TicketEventInput[], partialResult?: Record<string, unknown>): Promise<void> {
  if (!events.length) return;
  await tx.execute(
    `WITH head AS (
       UPDATE tickets SET event_seq = event_seq + ?${partialResult ? ', partial_result = ?::json, updated_at = now()' : ''} WHERE ticket = ? RETURNING event_seq - ? AS seq
     ), added AS (
       INSERT INTO ticket_events (ticket, seq, ts, type, payload)
       SELECT ?, head.seq + e.n, ?, e.type, e.payload
       FROM head, jsonb_to_recordset(?::jsonb) AS e(n int, type text, payload jsonb)
     )
     SELECT pg_notify('${TICKETS_CHANNEL}', ?)`,
    [events.length, ...(partialResult ? [JSON.stringify(partialResult)] : []), ticket, events.length, ticket, Date.now(), JSON.stringify(events.map((e, i) => ({ n: i + 1, ...e }))), ticket],
  );
}

export const appendTicketEvent = (tx: EntityManager, ticket: string, type: string, payload: Record<string, unknown>) => appendTicketEvents(tx, ticket, [{ type, payload }]);

/**
 * Moves a ticket's lifecycle by `trigger` inside `tx` (the row is locked).
 * Throws illegal_transition (store/transition.ts) for a move the table does not allow.
 */
export async function transitionTicket(tx: EntityManager, ticket: string, trigger: LifecycleTrigger, patch: TicketPatch = {}, actor = 'engine', opts: MoveTicketOptions = {}): Promise<TicketRow> {
  const moved = await announcing(
    tx,
    ticket,
    opts.announce,
    (announced) => moveTicket(tx, ticket, trigger, patch, actor, opts, announced),
    (row) => row !== undefined && CONTRACT_LIFECYCLE_MACHINE.isTerminal(row.lifecycle_state),
  );
  if (!moved) throw new AbcError('NOT_FOUND', { code: 'TICKET_NOT_FOUND', message: `ticket ${ticket} does not exist`, retryable: false });
  return moved;
}

/** Moves a ticket only if it is in `from`, in one statement; undefined when it is not (or does not exist). */
export function transitionTicketFrom(tx: EntityManager, ticket: string, from: LifecycleState, trigger: LifecycleTrigger, patch: TicketPatch = {}, actor = 'engine'): Promise<TicketRow | undefined> {
  return moveTicket(tx, ticket, trigger, patch, actor, { onlyFrom: from });
}

/**
 * The step commits a move's statement writes ahead of a hop (store/step-commit.ts):
 * their calls, whose events, numbered on from `ahead`, it appends ahead of the
 * hop's own. A move serializes the calls of all its hops once, into one
 * expression (stepsRecords).
 */
export type RecordsFirst = (ahead: number) => { events: number; steps: StepCall[] };

/** A step commit's argument for abc_step_records (store/step-commit.ts). */
export type StepCall = Record<string, unknown> & { ticket: string; step_id: string };

/**
 * Step commits' records as one expression: the steps of a ticket in one call
 * of abc_steps_records; else (a step twice) a call of abc_step_records each.
 */
export function stepsRecords(calls: StepCall[]): { sql: string; params: unknown[] } {
  const together = calls.every((c) => c.ticket === calls[0]!.ticket) && new Set(calls.map((c) => c.step_id)).size === calls.length;
  if (together) return { sql: 'abc_steps_records(?::jsonb)', params: [JSON.stringify(calls)] };
  return { sql: calls.map(() => 'abc_step_records(?::jsonb)').join(' || '), params: calls.map((c) => JSON.stringify(c)) };
}

/** Announces, after its commit, that a ticket's execution row changed, and whether its lifecycle ended (EventBus.announceTicket). */
export type AnnounceTicket = (ticket: string, ended?: boolean) => void;

/**
 * Runs `write`, a statement on `em` that changes `ticket`, and announces the
 * change after it, its statement notifying no one (`announce` is then given
 * to it), when `em` commits each statement on its own; inside a transaction,
 * whose commit comes later, the statement notifies. A write that fails may
 * have committed all the same: it is announced too, since a wake-up that finds
 * nothing new costs only a read. `ended` says whether what it wrote ended
 * the ticket's lifecycle; a write that failed is not announced as an end.
 */
export async function announcing<T>(em: EntityManager, ticket: string, announce: AnnounceTicket | undefined, write: (announce: boolean) => Promise<T>, ended?: (written: T) => boolean): Promise<T> {
  if (!announce || em.isInTransaction()) return write(false);
  let end = false;
  try {
    const written = await write(true);
    end = ended?.(written) ?? false;
    return written;
  } finally {
    announce(ticket, end);
  }
}

interface MoveTicketOptions {
  reason?: string;
  trace?: TicketEventInput[];
  from?: LifecycleState;
  /** Moves taken first, in the same write, each with its own trace and reason (and actor, when not the move's), and records written ahead of it. */
  through?: { trigger: LifecycleTrigger; trace?: TicketEventInput[]; reason?: string; first?: RecordsFirst; actor?: string }[];
  /** Other records written by the move's statement: data-modifying CTEs. */
  also?: { sql: string; params: unknown[] }[];
  /** Functions the move's statement calls with the written row (`moved`). */
  calls?: { sql: string; params: unknown[] }[];
  /** Records written ahead of the move's own hop (the last; each hop of `through` has its own). */
  first?: RecordsFirst;
  /** Announces the move after its commit, a move on its own (see announcing), and the end of the lifecycle with it. */
  announce?: AnnounceTicket;
  /** The ticket does not exist yet: the move creates it, from INIT, claimed (see createTicket). */
  create?: { ticket: NewTicket; lease: { owner: string; ms: number } };
}

async function moveTicket(
  tx: EntityManager,
  ticket: string,
  trigger: LifecycleTrigger,
  patch: TicketPatch,
  actor: string,
  opts: MoveTicketOptions & { onlyFrom?: LifecycleState },
  announced = false,
): Promise<TicketRow | undefined> {
  // Each hop's records written first, its trace, then seed 002's STATE_TRANSITION event for it; the move's statement appends them all.
  const steps: NonNullable<MoveTicketOptions['through']> = [...(opts.through ?? []), { trigger, trace: opts.trace, reason: opts.reason, first: opts.first }];
  // Numbered in that order: each hop's own events follow the records written ahead of it.
  const firsts: ReturnType<RecordsFirst>[] = [];
  const starts: number[] = [];
  let count = 0;
  for (const hop of steps) {
    const records = hop.first?.(count);
    if (records) firsts.push(records);
    count += records?.events ?? 0;
    starts.push(count);
    count += (hop.trace?.length ?? 0) + 1;
  }
  const first = firsts.length ? stepsRecords(firsts.flatMap((r) => r.steps)) : undefined;
  const events = (path: Path<LifecycleState>): (TicketEventInput & { n: number })[] =>
    path.hops.flatMap(({ from, to }, i) => {
      const { trigger: by, trace, reason, actor: hopActor } = steps[i]!;
      // The last hop's phase is the written row's; a hop on the way names its state's own.
      const phase = i < path.hops.length - 1 ? PHASE_OF[to] : undefined;
      if (i < path.hops.length - 1 && !phase) throw new Error(`a move through ${to} must end there`);
      const own: TicketEventInput[] = [...(trace ?? []), { type: 'STATE_TRANSITION', payload: { from, to, trigger: by, actor: hopActor ?? actor, ...(phase && { phase }), status: statusOf(to), ...(reason && { reason }) } }];
      return own.map((e, k) => ({ n: starts[i]! + k + 1, ...e }));
    });
  const moved = await writeTransition<LifecycleState, LifecycleTrigger, TicketRow>(tx, TICKETS, trigger, {
    // Not the documents: the move needs the state, and the written row comes back whole.
    columns: 'ticket, lifecycle_state, phase',
    where: 'ticket = ?',
    params: [ticket],
    ...(opts.create && { create: { from: 'INIT' as const, conflict: '(tenant_id, contract_id, idempotency_key)', columns: (path: Path<LifecycleState>) => createdColumns(opts.create!, path, count, patch) } }),
    set: ({ to }) => {
      const sets = ['status = ?', 'phase = coalesce(?, phase)', 'updated_at = now()', 'event_seq = event_seq + ?'];
      const params: unknown[] = [statusOf(to), PHASE_OF[to] ?? null, count];
      for (const column of PATCH_COLUMNS) {
        if (patch[column] === undefined) continue;
        const json = JSON_COLUMNS.has(column) || JSONB_COLUMNS.has(column);
        sets.push(`${column} = ?${JSON_COLUMNS.has(column) ? '::json' : JSONB_COLUMNS.has(column) ? '::jsonb' : ''}`);
        params.push(json ? JSON.stringify(patch[column]) : patch[column]);
      }
      if (patch.lease) {
        sets.push('lease_owner = ?', "lease_expires_at = now() + (?::text || ' milliseconds')::interval");
        params.push(patch.lease.owner, patch.lease.ms);
      }
      if (trigger === 'start') sets.push('started_at = coalesce(started_at, now())');
      if (CONTRACT_LIFECYCLE_MACHINE.isTerminal(to)) sets.push('finished_at = now()', 'lease_owner = NULL', 'lease_expires_at = NULL');
      return { sql: sets, params };
    },
    // The events, numbered from the counter the move bumped; the last transition's carries the phase as written.
    also: (path) => [
      {
        // The records written first depend on the written row: a move that matched none writes none of them.
        sql: `INSERT INTO ticket_events (ticket, seq, ts, type, payload)
              SELECT moved.ticket, moved.event_seq - ? + e.n, ?::bigint, e.type, CASE WHEN e.n = ? THEN e.payload || jsonb_build_object('phase', moved.phase) ELSE e.payload END
              FROM moved${first ? `, LATERAL (SELECT CASE WHEN moved.ticket IS NOT NULL THEN ${first.sql} END AS first) f` : ''},
                   jsonb_to_recordset(${first ? 'f.first || ' : ''}?::jsonb) AS e(n int, type text, payload jsonb)`,
        params: [count, Date.now(), count, ...(first?.params ?? []), JSON.stringify(events(path))],
      },
      ...(opts.also ?? []),
    ],
    // Announced, the move notifies no one: a commit that notifies holds PostgreSQL's notification lock through its WAL flush (store/notifier.ts).
    // A crash between the commit and the announcement leaves a waiter for the end to its recheck (contracts/service.ts).
    ...(!announced && !opts.create && { notify: { channel: TICKETS_CHANNEL, payload: 'ticket' }, notifyOnEnd: { channel: TICKET_ENDED_CHANNEL, payload: 'ticket' } }),
    returning: true,
    oneStatement: true,
    prepared: true,
    ...(opts.calls && { calls: opts.calls }),
    ...(opts.from && { from: opts.from }),
    ...(opts.through && { through: opts.through.map((h) => h.trigger) }),
    ...(opts.onlyFrom && { onlyFrom: opts.onlyFrom }),
  });
  return moved?.after;
}

/**
 * Creates a ticket claimed by the worker that runs it at once, moved from INIT
 * by `through` and `trigger` in the statement that inserts it, with each hop's
 * events and the records of `also`; undefined, with nothing written, when its
 * idempotency key is taken. No one can watch a ticket before its id is
 * answered: its creation notifies no one.
 */
export function createTicket(
  em: EntityManager,
  t: NewTicket,
  lease: { owner: string; ms: number },
  trigger: LifecycleTrigger,
  patch: Omit<TicketPatch, 'lease'>,
  actor: string,
  opts: TicketMoveRecords = {},
): Promise<TicketRow | undefined> {
  return moveTicket(em, t.ticket, trigger, patch, actor, { ...opts, create: { ticket: t, lease } });
}

/** What a ticket's move records besides the row: each hop's trace and reason, and other records of its statement. */
export type TicketMoveRecords = Pick<MoveTicketOptions, 'trace' | 'reason' | 'through' | 'also'>;

/**
 * The row createTicket writes for `t` in `state`, claimed by `owner`, as its
 * creator knows it before the commit: the times are this process's, not the
 * database's, until the written row replaces it.
 */
export function createdRow(t: NewTicket, state: LifecycleState, owner: string): TicketRow {
  const { retention_ms: retention, ...fields } = t;
  const now = new Date();
  return {
    ...fields,
    status: statusOf(state),
    phase: PHASE_OF[state]!,
    lifecycle_state: state,
    plan_id: null,
    assembly_id: null,
    assembly_version: null,
    partial_result: null,
    result: null,
    error: null,
    warnings: null,
    next_ticket: null,
    artifact: null,
    artifact_media_type: null,
    engine: {},
    human_deadline: null,
    lease_owner: owner,
    created_at: now,
    updated_at: now,
    expires_at: new Date(now.getTime() + retention),
  };
}

/** The columns a created ticket is inserted with, in the state its path reaches. */
function createdColumns(c: NonNullable<MoveTicketOptions['create']>, path: Path<LifecycleState>, events: number, patch: TicketPatch): { names: string[]; values: string[]; params: unknown[] } {
  if (CONTRACT_LIFECYCLE_MACHINE.isTerminal(path.to)) throw new Error('a ticket is not created finished');
  const t = c.ticket;
  const later = "now() + ?::bigint * interval '1 millisecond'";
  const columns: [string, string, unknown][] = [
    ['ticket', '?', t.ticket], ['tenant_id', '?', t.tenant_id], ['contract_id', '?', t.contract_id], ['contract_version', '?', t.contract_version],
    ['request_id', '?', t.request_id], ['session_id', '?', t.session_id], ['idempotency_key', '?', t.idempotency_key], ['request_hash', '?', t.request_hash],
    ['request', '?::jsonb', JSON.stringify(t.request)], ['mode', '?', t.mode], ['status', '?', statusOf(path.to)], ['phase', '?', PHASE_OF[path.to]],
    ['trace_id', '?', t.trace_id], ['traceparent', '?', t.traceparent], ['expected_latency_ms', '?', t.expected_latency_ms], ['expires_at', later, t.retention_ms],
    ['event_seq', '?', events], ['lease_owner', '?', c.lease.owner], ['lease_expires_at', later, c.lease.ms],
  ];
  for (const column of PATCH_COLUMNS) {
    if (patch[column] === undefined) continue;
    const json = JSON_COLUMNS.has(column) || JSONB_COLUMNS.has(column);
    columns.push([column, JSON_COLUMNS.has(column) ? '?::json' : JSONB_COLUMNS.has(column) ? '?::jsonb' : '?', json ? JSON.stringify(patch[column]) : patch[column]]);
  }
  const started = path.hops.some((h) => h.trigger === 'start');
  return {
    names: [...columns.map(([name]) => name), ...(started ? ['started_at'] : [])],
    values: [...columns.map(([, value]) => value), ...(started ? ['now()'] : [])],
    params: columns.map(([, , value]) => value),
  };
}

/** Moves one step by `trigger` inside `tx`, with its event. */
export async function transitionStep(
  tx: EntityManager,
  ticket: string,
  stepId: string,
  trigger: StepTrigger,
  patch: {
    output?: unknown;
    message?: string;
    capability?: string;
    sideEffect?: boolean;
    trace?: TicketEventInput[];
    partialResult?: Record<string, unknown>;
    /** This move's events go here instead of to the log: a later move of the transaction appends them (`prior`). */
    collect?: TicketEventInput[];
    /** Events of earlier moves of this transaction, appended ahead of this move's in one statement. */
    prior?: TicketEventInput[];
  } = {},
): Promise<StepRow> {
  // A step put back runs again as a new attempt: a new execution contract (opened before the step row moves).
  const moved = await writeTransition<StepState, StepTrigger, StepRow>(tx, STEPS, trigger, {
    where: 'ticket = ? AND step_id = ?',
    params: [ticket, stepId],
    set: () => ({
      sql: [
        'output = coalesce(?::jsonb, output)',
        'message = coalesce(?, message)',
        'capability = coalesce(?, capability)',
        'side_effect = coalesce(?, side_effect)',
        "started_at = CASE WHEN ? IN ('start', 'restart') THEN now() ELSE started_at END",
        "ended_at = CASE WHEN ? IN ('succeed', 'fail', 'skip') THEN now() ELSE ended_at END",
      ],
      params: [patch.output === undefined ? null : JSON.stringify(patch.output), patch.message ?? null, patch.capability ?? null, patch.sideEffect ?? null, trigger, trigger],
    }),
    returning: true,
    oneStatement: true,
  });
  if (!moved) throw new AbcError('NOT_FOUND', { code: 'STEP_NOT_FOUND', message: `step ${stepId} of ${ticket} does not exist`, retryable: false });
  const row = moved.row;
  const to = moved.to;
  if (trigger === 'retry' || trigger === 'reset') await reopenContract(tx, ticket, row, patch.capability ?? row.capability);
  const mirrored = STEP_TO_CONTRACT[`${row.status}:${trigger}`];
  const updated = moved.after!;
  const events: TicketEventInput[] = [stepTransitionEvent(stepId, row.status, to, trigger, patch.message), ...(patch.trace ?? [])];
  if (mirrored) {
    const actor = contractActor(trigger, updated!.capability);
    const state = await moveContract(tx, { ticket, subjectId: stepId }, mirrored, actor, {
      ...(to === 'SUCCEEDED' && { result: summariseOutcome(patch.output ?? null) }),
      ...((to === 'FAILED' || to === 'SKIPPED') && patch.message && { errorMessage: patch.message }),
    });
    if (state) events.push({ type: 'execution_state', payload: { ...state } });
  }
  if (patch.collect) patch.collect.push(...events);
  else await appendTicketEvents(tx, ticket, [...(patch.prior ?? []), ...events], patch.partialResult);
  return updated!;
}

/** The `step_transition` event of one step hop. */
export const stepTransitionEvent = (stepId: string, from: StepState, to: StepState, trigger: StepTrigger, message?: string): TicketEventInput => ({
  type: 'step_transition',
  payload: { step_id: stepId, from, to, trigger, ...(message && { message }) },
});

/** Who moves a step's execution contract: the tool node for a tool, the graph runner otherwise and for a skip. */
export const contractActor = (trigger: StepTrigger, capability: string) => (trigger === 'skip' || !capability.startsWith('tool.') ? 'graph_runner' : 'tool_node');

/** Opens the execution contract of a step's next attempt. */
async function reopenContract(tx: EntityManager, ticket: string, step: StepRow, capability: string): Promise<void> {
  const [t] = await tx.execute<{ session_id: string; attempts: number; timeout_seconds: number | null }[]>(
    `SELECT c.session_id, count(e.execution_id)::int AS attempts, (array_agg(e.timeout_seconds ORDER BY e.created_at DESC))[1] AS timeout_seconds
     FROM tickets c LEFT JOIN execution_contracts e ON e.ticket = c.ticket AND e.subject_id = ?
     WHERE c.ticket = ? GROUP BY c.session_id`,
    [step.step_id, ticket],
  );
  await openContract(tx, {
    sessionId: t!.session_id,
    ticket,
    subjectId: step.step_id,
    actionType: 'contract_step',
    actionSummary: `${capability} → ${step.label}`,
    irreversible: step.side_effect,
    idempotencyKey: `${ticket}:${step.step_id}:${t!.attempts + 1}`,
    ...(t!.timeout_seconds && { timeoutSeconds: t!.timeout_seconds }),
  });
}

/** Each step hop and the seed-004 execution contract move it mirrors (a restart is not a move). */
export const STEP_TO_CONTRACT: Record<string, ExecutionTrigger | undefined> = {
  'PENDING:start': 'start',
  'RUNNING:succeed': 'succeed',
  'RUNNING:fail': 'fail',
  'PENDING:fail': 'cancel',
  'PENDING:skip': 'cancel',
};


/**
 * Deletes finished tickets past their retention, with their steps and events
 * (frozen plans and execution contracts stay: they are history). Returns how
 * many went. A running ticket is never deleted.
 */
export async function deleteExpiredTickets(em: EntityManager, limit = 500): Promise<number> {
  return em.transactional(async (tx) => {
    const gone = await tx.execute<{ ticket: string }[]>(
      `DELETE FROM tickets WHERE ticket IN (
         SELECT ticket FROM tickets
         WHERE expires_at < now() AND status IN ('SUCCEEDED', 'FAILED', 'CANCELED')
         ORDER BY expires_at LIMIT ? FOR UPDATE SKIP LOCKED)
       RETURNING ticket`,
      [limit],
    );
    if (!gone.length) return 0;
    const tickets = JSON.stringify(gone.map((g) => g.ticket));
    await tx.execute(`DELETE FROM ticket_steps WHERE ${inJsonList('ticket')}`, [tickets]);
    await tx.execute(`DELETE FROM ticket_events WHERE ${inJsonList('ticket')}`, [tickets]);
    return gone.length;
  });
}

/** New step rows of a ticket, PENDING. */
export type NewStep = Pick<StepRow, 'step_id' | 'position' | 'label' | 'capability' | 'side_effect'>;

export async function insertSteps(tx: EntityManager, ticket: string, steps: NewStep[]): Promise<StepRow[]> {
  const insert = stepsInsert(ticket, steps);
  return tx.execute<StepRow[]>(`${insert.sql} RETURNING *`, insert.params);
}

/** New steps' INSERT, PENDING, for a statement that writes them with other records. */
export function stepsInsert(ticket: string, steps: NewStep[]): { sql: string; params: unknown[] } {
  return {
    sql: `INSERT INTO ticket_steps (ticket, step_id, position, label, capability, side_effect, status, message)
          SELECT ?::text, s.step_id, s.position, s.label, s.capability, s.side_effect, 'PENDING', NULL
          FROM jsonb_to_recordset(?::jsonb) AS s(step_id text, position int, label text, capability text, side_effect boolean)`,
    params: [ticket, JSON.stringify(steps)],
  };
}

/** New steps as their INSERT writes them. */
export const newStepRows = (ticket: string, steps: NewStep[]): StepRow[] =>
  steps.map((s) => ({ ticket, ...s, status: 'PENDING', output: null, message: null, started_at: null, ended_at: null }));

/** Points a step at another capability (a replan), outside its state machine. */
export async function retargetStep(tx: EntityManager, ticket: string, stepId: string, to: { capability: string; side_effect: boolean; label: string }): Promise<StepRow> {
  const [row] = await tx.execute<StepRow[]>('UPDATE ticket_steps SET capability = ?, side_effect = ?, label = ? WHERE ticket = ? AND step_id = ? RETURNING *', [to.capability, to.side_effect, to.label, ticket, stepId]);
  return row!;
}

export type NewTicket = Pick<TicketRow, 'ticket' | 'tenant_id' | 'contract_id' | 'contract_version' | 'request_id' | 'session_id' | 'idempotency_key' | 'request_hash' | 'request' | 'mode' | 'trace_id' | 'traceparent' | 'expected_latency_ms'> & {
  /** How long it stays pollable. */
  retention_ms: number;
};

/**
 * Creates a ticket in INIT (or started, for `start`), claimed when given a
 * claim, in one statement with its first event when given; undefined when
 * its idempotency key is taken, and then nothing is written.
 */
export async function insertTicket(
  em: EntityManager,
  t: NewTicket,
  also: {
    event?: TicketEventInput;
    /** The claim of a worker that runs the ticket at once: it is created started (INIT → start, recorded) and leased. */
    start?: { owner: string; ms: number };
    /** A claim the ticket is created with, in INIT (ContractQueue.admission). */
    claim?: { owner: string; ms: number };
  } = {},
): Promise<TicketRow | undefined> {
  if (also.start) return createTicket(em, t, also.start, 'start', {}, 'worker', { trace: also.event ? [also.event] : [] });
  const events = also.event ? [also.event] : [];
  const lease = also.claim;
  // No one can watch a ticket before its id is answered: its creation notifies no one.
  // A prepared statement on its own (executeOne): each parameter is typed where it stands.
  const [row] = await executeOne<TicketRow>(
    em,
    `WITH t AS (
       INSERT INTO tickets (ticket, tenant_id, contract_id, contract_version, request_id, session_id, idempotency_key, request_hash, request, mode,
         status, phase, lifecycle_state, trace_id, traceparent, expected_latency_ms, expires_at, event_seq, lease_owner, lease_expires_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?, ?, ?, now() + ?::bigint * interval '1 millisecond', ?,
         ?, now() + ?::bigint * interval '1 millisecond')
       ON CONFLICT (tenant_id, contract_id, idempotency_key) DO NOTHING RETURNING *
     )${events.length ? ', event AS (INSERT INTO ticket_events (ticket, seq, ts, type, payload) SELECT t.ticket, e.n, ?::bigint, e.type, e.payload FROM t, jsonb_to_recordset(?::jsonb) AS e(n int, type text, payload jsonb))' : ''}
     SELECT t.* FROM t`,
    [
      t.ticket, t.tenant_id, t.contract_id, t.contract_version, t.request_id, t.session_id, t.idempotency_key, t.request_hash, JSON.stringify(t.request), t.mode,
      statusOf('INIT'), PHASE_OF.INIT, 'INIT', t.trace_id, t.traceparent, t.expected_latency_ms, t.retention_ms, events.length,
      lease?.owner ?? null, lease?.ms ?? null,
      ...(events.length ? [Date.now(), JSON.stringify(events.map((e, i) => ({ n: i + 1, ...e })))] : []),
    ],
  );
  return row;
}

export async function ticketByIdempotencyKey(em: EntityManager, tenantId: string, contractId: string, key: string): Promise<TicketRow | undefined> {
  const [row] = await em.execute<TicketRow[]>('SELECT * FROM tickets WHERE tenant_id = ? AND contract_id = ? AND idempotency_key = ?', [tenantId, contractId, key]);
  return row;
}

/** An unexpired ticket, through sessions that cannot write. */
export async function readLiveTicket(readOnly: pg.Pool, ticket: string): Promise<TicketRow | undefined> {
  const { rows } = await readOnly.query<TicketRow>('SELECT * FROM tickets WHERE ticket = $1 AND expires_at > now()', [ticket]);
  return rows[0];
}

/** What a poller may see, in one statement through sessions that cannot write: no step outputs, no artifact. */
export async function readTicketForPoll(readOnly: pg.Pool, ticket: string): Promise<(TicketRow & { steps: StepRow[] }) | undefined> {
  const { rows } = await readOnly.query<TicketRow & { steps: StepRow[] }>(
    `SELECT c.ticket, c.tenant_id, c.contract_id, c.contract_version, c.status, c.phase, c.lifecycle_state, c.next_ticket, c.expires_at,
            c.expected_latency_ms, c.trace_id,
            jsonb_build_object('execution_preferences', c.request->'execution_preferences') AS request,
            CASE WHEN c.status = 'RUNNING' THEN c.partial_result END AS partial_result,
            CASE WHEN c.status = 'SUCCEEDED' THEN c.result END AS result,
            CASE WHEN c.status = 'FAILED' THEN c.error END AS error,
            coalesce((SELECT jsonb_agg(jsonb_build_object('step_id', s.step_id, 'label', s.label, 'status', s.status, 'message', s.message,
                                                         'started_at', s.started_at, 'ended_at', s.ended_at) ORDER BY s.position)
                      FROM ticket_steps s WHERE s.ticket = c.ticket), '[]') AS steps
     FROM tickets c
     WHERE c.ticket = $1 AND (c.expires_at > now() OR c.status NOT IN ('SUCCEEDED', 'FAILED', 'CANCELED'))`,
    [ticket],
  );
  return rows[0];
}

/** Tells the worker executing `ticket`, on whichever core, to stop (delivered at commit). */
export async function notifyCancel(tx: EntityManager, ticket: string): Promise<void> {
  await tx.execute('SELECT pg_notify(?, ?)', [CANCEL_CHANNEL, ticket]);
}

/** A worker's claim on a ticket (the queue's lease), taken inside `tx`. */
export async function takeTicketLease(tx: EntityManager, ticket: string, workerId: string, leaseMs: number): Promise<void> {
  await tx.execute(`UPDATE tickets SET lease_owner = ?, lease_expires_at = now() + (? || ' milliseconds')::interval WHERE ticket = ?`, [workerId, leaseMs, ticket]);
}

/** Renews a claim; false when another worker holds the ticket now. */
export async function renewTicketLease(em: EntityManager, ticket: string, workerId: string, leaseMs: number): Promise<boolean> {
  const rows = await em.execute<{ ticket: string }[]>(
    `UPDATE tickets SET lease_expires_at = now() + (? || ' milliseconds')::interval WHERE ticket = ? AND lease_owner = ? RETURNING ticket`,
    [leaseMs, ticket, workerId],
  );
  return rows.length > 0;
}

/** Drops the claims on `tickets` (only those of `workerId` when given). */
export async function releaseTicketLeases(em: EntityManager, tickets: string[], workerId?: string): Promise<void> {
  await em.execute(
    `UPDATE tickets SET lease_owner = NULL, lease_expires_at = NULL WHERE ${inJsonList('ticket')}${workerId ? ' AND lease_owner = ?' : ''}`,
    workerId ? [JSON.stringify(tickets), workerId] : [JSON.stringify(tickets)],
  );
}

/** The prefix of an async ticket's claim from its creation until its job is added (ContractQueue.admit). */
const ADMITTED = 'admitted-';
export const admissionOwner = (ticket: string) => `${ADMITTED}${ticket}`;

/**
 * Adds the jobs of those of `tickets` still claimed by their admission, and
 * drops those claims, in one statement: a ticket whose claim is gone (a cancel
 * ended it, or the recovery sweep gave it a job) gets none. `jobs` is the
 * enqueue of a set of tickets, as a call that returns a row a job, over an
 * expression of their ids (a text array).
 */
export async function addAdmittedJobs(pool: Queryable, tickets: string[], jobs: (tickets: string) => { sql: string; params: unknown[] }): Promise<void> {
  const add = jobs('ARRAY(SELECT ticket FROM mine)');
  await pool.query({
    ...prepared(`WITH mine AS (
      UPDATE tickets SET lease_owner = NULL, lease_expires_at = NULL
      WHERE ${inJsonList('ticket')} AND lease_owner = '${ADMITTED}' || ticket
      RETURNING ticket)
    SELECT count(*) AS n FROM ${add.sql} WHERE EXISTS (SELECT 1 FROM mine)`),
    values: [JSON.stringify(tickets), ...add.params],
  });
}

/** Locks up to 100 unfinished tickets whose claim lapsed (SKIP LOCKED). */
export function lockStaleTicketLeases(tx: EntityManager): Promise<{ ticket: string; lease_owner: string }[]> {
  return tx.execute(
    `SELECT ticket, lease_owner FROM tickets
     WHERE lease_expires_at < now() AND status NOT IN ('SUCCEEDED', 'FAILED', 'CANCELED')
     FOR UPDATE SKIP LOCKED LIMIT 100`,
  );
}
