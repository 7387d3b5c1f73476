// One commit of a contract step's moves: its start, its end, or both. The
// hops are decided first, the step's by its machine's transition() and its
// execution contract's by theirs; then one call (abc_commit_step) writes the
// step row, the contract with a transition record per hop and its fact, the
// step's memory and the ticket events. A row in another state than the hops
// start from (a cancel skipped the step, a step older than its contract
// mirror) makes that call write nothing, and the commit goes move by move
// through transitionStep, which decides and fails as it always has.
import type { EntityManager } from '@mikro-orm/postgresql';
import { CONTRACT_STEP_MACHINE, type StepState, type StepTrigger } from '../domain/contract-lifecycle.machine.js';
import { actorCategory, EXECUTION_CONTRACT_MACHINE, type ExecutionState } from '../domain/execution-contract.machine.js';
import { transition } from '../domain/machine.js';
import { newId } from '../runtime/new-id.js';
import { TICKETS_CHANNEL } from './event-bus.js';
import { moveFacts, moveTime, summariseOutcome } from './execution-contracts.js';
import { storeMemoryRows, type MemoryRow } from './memory.js';
import { executeGuarded } from './native.js';
import { announcing, contractActor, STEP_TO_CONTRACT, stepTransitionEvent, transitionStep, type AnnounceTicket, type RecordsFirst, type StepCall, type StepRow, type TicketEventInput } from './ticket-store.js';

export interface StepHop {
  trigger: StepTrigger;
  trace?: TicketEventInput[];
  message?: string;
}

export interface StepCommit {
  ticket: string;
  stepId: string;
  /** The step as last committed: the hops start from its state. */
  row: Pick<StepRow, 'status' | 'capability'>;
  hops: StepHop[];
  /** Columns the last hop sets. */
  output?: unknown;
  capability?: string;
  sideEffect?: boolean;
  /** What pollers may see of the running ticket, written with the events. */
  partialResult?: Record<string, unknown>;
  /** Memory stored with the moves. */
  memory?: MemoryRow[];
  /** Other writes of the commit; a commit with them goes move by move. */
  also?: (tx: EntityManager) => Promise<unknown>;
}

/** The execution contract's state while its step is in a state. */
const CONTRACT_STATE_OF: Partial<Record<StepState, ExecutionState>> = { PENDING: 'pending', RUNNING: 'running' };

/**
 * Commits the hops; the step row as written. Throws what transitionStep
 * throws for a move the machine refuses. With `announce`, a commit in one
 * statement announces itself after it (see announcing).
 */
export async function commitStep(em: () => EntityManager, c: StepCommit, announce?: AnnounceTicket): Promise<StepRow> {
  const call = c.also ? undefined : callOf(c);
  const db = em();
  const written = call && (await announcing(db, c.ticket, announce, (announced) => executeGuarded<StepRow>(db, 'SELECT * FROM abc_commit_step(?::jsonb)', [JSON.stringify(quiet(call, announced))])));
  if (written) return written[0]!;
  return em().transactional(async (tx) => {
    await c.also?.(tx);
    await storeMemoryRows(tx, c.memory ?? []);
    const collect: TicketEventInput[] = [];
    let row: StepRow | undefined;
    for (const [i, hop] of c.hops.entries()) {
      const last = i === c.hops.length - 1;
      row = await transitionStep(tx, c.ticket, c.stepId, hop.trigger, {
        trace: hop.trace,
        message: hop.message,
        ...(last ? { output: c.output, capability: c.capability, sideEffect: c.sideEffect, partialResult: c.partialResult, prior: collect } : { collect }),
      });
    }
    return row!;
  });
}

/**
 * Commits several steps' hops in one call (abc_commit_steps); the rows as
 * written, in order. Undefined, with nothing written, when one of them cannot
 * go by abc_commit_step or its row is in another state: each then commits alone.
 */
export async function commitStepsTogether(em: () => EntityManager, commits: StepCommit[], announce?: AnnounceTicket): Promise<StepRow[] | undefined> {
  const calls = commits.map((c) => (c.also ? undefined : callOf(c)));
  if (calls.some((c) => !c)) return undefined;
  const db = em();
  // One batch's steps: one ticket's.
  const written = await announcing(db, commits[0]!.ticket, announce, (announced) =>
    executeGuarded<StepRow>(db, 'SELECT * FROM abc_commit_steps(?::jsonb)', [JSON.stringify(calls.map((c) => quiet(c!, announced)))]),
  );
  return written && commits.map((c) => written.find((r) => r.step_id === c.stepId)!);
}

/**
 * Step commits' own records for a ticket move's statement (its `first`): each
 * step row, its contract's moves and its memory, whose events (numbered on
 * from `ahead`, across the steps) the move appends ahead of its own (see
 * RecordsFirst). Undefined when a commit cannot go by abc_commit_step.
 */
export function stepRecords(commits: StepCommit[], ahead = 0): ReturnType<RecordsFirst> | undefined {
  const steps: StepCall[] = [];
  let events = 0;
  for (const c of commits) {
    const call = c.also ? undefined : callOf(c, ahead + events, true);
    if (!call) return undefined;
    steps.push(call);
    events += (call.events as unknown[]).length;
  }
  return { events, steps };
}

/** The state stepRecords would write the step in, without building its records; undefined when it cannot write the commit. */
export function recordsTarget(c: StepCommit): StepState | undefined {
  return c.also ? undefined : walk(c)?.state;
}

/** The commit's hops as abc_commit_step writes them; undefined when a hop needs more than it writes (a retry or reset opens a new contract). */
function walk(c: StepCommit) {
  const events: TicketEventInput[] = [];
  const hops: Record<string, unknown>[] = [];
  let state = c.row.status;
  let contract: { from: ExecutionState; to: ExecutionState; at: Date } | undefined;
  let message: string | undefined;
  for (const [i, hop] of c.hops.entries()) {
    const next = transition(CONTRACT_STEP_MACHINE, state, hop.trigger);
    if (!next.ok || hop.trigger === 'retry' || hop.trigger === 'reset') return undefined;
    events.push(stepTransitionEvent(c.stepId, state, next.value, hop.trigger, hop.message), ...(hop.trace ?? []));
    const mirrored = STEP_TO_CONTRACT[`${state}:${hop.trigger}`];
    if (mirrored) {
      const from = contract?.to ?? CONTRACT_STATE_OF[state];
      const moved = from && transition(EXECUTION_CONTRACT_MACHINE, from, mirrored);
      if (!from || !moved?.ok) return undefined;
      const at = moveTime();
      const actor = contractActor(hop.trigger, i === c.hops.length - 1 ? (c.capability ?? c.row.capability) : c.row.capability);
      hops.push({ n: hops.length + 1, from_status: from, to_status: moved.value, trigger: mirrored, actor, actor_category: actorCategory(actor), ts: at.toISOString() });
      // abc_commit_step adds the contract's id, summary and side effects (and a fact's error).
      events.push({ type: 'execution_state', payload: moveFacts(from, moved.value, mirrored, actor, at) });
      contract = { from: contract?.from ?? from, to: moved.value, at };
    }
    message = hop.message ?? message;
    state = next.value;
  }
  return { events, hops, state, contract, message };
}

/** A call of an `announced` commit: it notifies no one. */
const quiet = (call: Record<string, unknown>, announced: boolean) => (announced ? { ...call, channel: null } : call);

/**
 * abc_commit_step's argument, its events numbered after `ahead` others;
 * undefined when walk() refuses the hops. Within a move, without what the
 * move writes itself: the partial result, the events' time, the notice.
 */
function callOf(c: StepCommit, ahead = 0, inMove = false): StepCall | undefined {
  const walked = walk(c);
  if (!walked) return undefined;
  const { events, hops, state, contract, message } = walked;
  const triggers = c.hops.map((h) => h.trigger);
  return {
    ticket: c.ticket,
    step_id: c.stepId,
    from: c.row.status,
    to: state,
    ...(c.output !== undefined && { output: c.output }),
    ...(message !== undefined && { message }),
    ...(c.capability !== undefined && { capability: c.capability }),
    ...(c.sideEffect !== undefined && { side_effect: c.sideEffect }),
    started: triggers.some((t) => t === 'start' || t === 'restart'),
    ended: triggers.some((t) => t === 'succeed' || t === 'fail' || t === 'skip'),
    ...(contract && {
      contract: {
        from: contract.from,
        to: contract.to,
        at: contract.at.toISOString(),
        hops,
        terminal: EXECUTION_CONTRACT_MACHINE.isTerminal(contract.to),
        fact_id: newId('mem'),
        ...(state === 'SUCCEEDED' && { result: summariseOutcome(c.output ?? null) }),
        ...((state === 'FAILED' || state === 'SKIPPED') && c.hops.at(-1)!.message && { error_message: c.hops.at(-1)!.message }),
      },
    }),
    ...(c.memory?.length && { memory: c.memory }),
    events: events.map((e, i) => ({ n: ahead + i + 1, ...e })),
    ...(!inMove && { ...(c.partialResult && { partial_result: JSON.stringify(c.partialResult) }), ts: Date.now(), channel: TICKETS_CHANNEL }),
  };
}
