// A step's commit in one call (abc_commit_step): the same records as its
// moves written one by one through transitionStep, in one statement; and a
// row in another state than the moves start from writes nothing and is
// refused as before. A batch's steps ready together commit as one call; a
// ticket move may write a step's commit first, in its own statement.
import { describe, expect, it } from 'vitest';
import { openContracts } from '../../src/store/execution-contracts.js';
import { memoryRow } from '../../src/store/memory.js';
import { StepCommitQueue } from '../../src/engine/step-commits.js';
import { commitStep, stepRecords, type StepCommit } from '../../src/store/step-commit.js';
import { insertSteps, insertTicket, transitionStep, transitionTicket } from '../../src/store/ticket-store.js';
import { countedDatabase } from '../support/db.js';

const { em, counted } = countedDatabase();

/** A ticket with PENDING steps and their execution contracts, as EXECUTION_PREPARE leaves them. */
async function seed(ticket: string, capability = 'tool.pure', steps = ['s1']) {
  await em().transactional(async (tx) => {
    await insertTicket(tx, {
      ticket, tenant_id: 'default', contract_id: 'c', contract_version: '1', request_id: `req-${ticket}`, session_id: 'sess-step-commit', idempotency_key: ticket,
      request_hash: 'h', request: {}, mode: 'async', trace_id: 't', traceparent: null, expected_latency_ms: 1000, retention_ms: 60_000,
    });
    await insertSteps(tx, ticket, steps.map((step_id, position) => ({ step_id, position, label: 'Step one', capability, side_effect: false })));
    await openContracts(tx, steps.map((subjectId) => ({ sessionId: 'sess-step-commit', ticket, subjectId, actionType: 'contract_step', actionSummary: `${capability} → Step one`, irreversible: false })));
  });
}

const runAndSucceed = (ticket: string, stepId = 's1'): StepCommit => ({
  ticket,
  stepId,
  row: { status: 'PENDING', capability: 'tool.pure' },
  hops: [
    { trigger: 'start', trace: [{ type: 'TOOL_CALL_START', payload: { step_id: 's1' } }] },
    { trigger: 'succeed', message: 'used its fallback', trace: [{ type: 'TOOL_CALL_END', payload: { step_id: 's1', success: true } }] },
  ],
  output: { answer: 42 },
  capability: 'tool.fallback',
  sideEffect: false,
  partialResult: { done: ['s1'] },
  memory: [memoryRow('default', 'step_context', { step_id: 's1' }, 'EPHEMERAL', `${ticket}:s1`)],
});

/** What a commit left, without ids and clocks. */
async function records(ticket: string) {
  const e = em();
  const [step] = await e.execute<Record<string, unknown>[]>('SELECT status, output, message, capability, side_effect, started_at IS NOT NULL AS started, ended_at IS NOT NULL AS ended FROM ticket_steps WHERE ticket = ?', [ticket]);
  const events = await e.execute<{ seq: number; type: string; payload: Record<string, unknown> }[]>('SELECT seq, type, payload FROM ticket_events WHERE ticket = ? ORDER BY seq', [ticket]);
  const [contract] = await e.execute<{ execution_id: string }[]>('SELECT execution_id, status, result, error_message, version FROM execution_contracts WHERE ticket = ?', [ticket]);
  const transitions = await e.execute('SELECT sequence_number, from_status, to_status, trigger, actor, actor_category FROM execution_transitions WHERE execution_id = ? ORDER BY sequence_number', [contract!.execution_id]);
  const memory = await e.execute<{ scope: string; key: string; value: Record<string, unknown> }[]>("SELECT scope, key, value FROM memory WHERE scope_id IN (?, 'sess-step-commit') AND (key = 'step_context' OR value->>'execution_id' = ?) ORDER BY key", [`${ticket}:s1`, contract!.execution_id]);
  const [head] = await e.execute('SELECT event_seq, partial_result FROM tickets WHERE ticket = ?', [ticket]);
  const { execution_id: _, ...rest } = contract as Record<string, unknown>;
  return {
    step,
    events: events.map(({ seq, type, payload: { execution_id, timestamp, ...p } }): { seq: number; type: string; payload: Record<string, unknown> } => ({ seq, type, payload: { ...p, ...(execution_id !== undefined && { execution_id: execution_id === contract!.execution_id }), ...(timestamp !== undefined && { timestamp: typeof timestamp }) } })),
    contract: rest,
    transitions,
    memory: memory.map(({ key, value: { execution_id, duration_ms, ...v }, ...m }) => ({ ...m, key: key.replace(contract!.execution_id, 'EXE'), value: { ...v, ...(execution_id !== undefined && { execution_id: 'EXE', duration_ms: typeof duration_ms }) } })),
    head,
  };
}

/** What several steps' commits left of a ticket, without ids and clocks, in step order (its events aside). */
async function stepsLeft(ticket: string) {
  return {
    steps: await em().execute('SELECT step_id, status, output, message, capability, started_at IS NOT NULL AS started, ended_at IS NOT NULL AS ended FROM ticket_steps WHERE ticket = ? ORDER BY step_id', [ticket]),
    contracts: await em().execute('SELECT subject_id, status, result, version FROM execution_contracts WHERE ticket = ? ORDER BY subject_id', [ticket]),
    transitions: await em().execute('SELECT c.subject_id, t.sequence_number, t.from_status, t.to_status, t.trigger, t.actor FROM execution_transitions t JOIN execution_contracts c USING (execution_id) WHERE c.ticket = ? ORDER BY 1, 2', [ticket]),
    facts: await em().execute("SELECT c.subject_id, m.value->>'final_status' AS status FROM memory m JOIN execution_contracts c ON m.key = 'execution_fact:' || c.execution_id WHERE c.ticket = ? ORDER BY 1", [ticket]),
    states: (await em().execute<{ payload: Record<string, unknown> }[]>("SELECT payload FROM ticket_events WHERE ticket = ? AND type = 'execution_state' ORDER BY seq", [ticket]))
      .map(({ payload: { execution_id, timestamp, ...p } }) => ({ ...p, execution_id: typeof execution_id })),
  };
}

describe('a step commit', () => {
  it('writes in one statement what its moves write one by one', async () => {
    await seed('tkt_sc_once');
    await seed('tkt_sc_moves');
    const calls: string[] = [];
    await commitStep(() => counted(calls), runAndSucceed('tkt_sc_once'));
    expect(calls).toEqual(['SELECT * FROM abc_commit_step($1::jsonb)']);
    // Another write of the commit takes it move by move, through transitionStep.
    await commitStep(em, { ...runAndSucceed('tkt_sc_moves'), also: async () => undefined });

    const once = await records('tkt_sc_once');
    expect(once).toEqual(await records('tkt_sc_moves'));
    expect(once.step).toEqual({ status: 'SUCCEEDED', output: { answer: 42 }, message: 'used its fallback', capability: 'tool.fallback', side_effect: false, started: true, ended: true });
    expect(once.events.map((e) => [e.seq, e.type, e.payload.trigger ?? ''])).toEqual([
      [1, 'step_transition', 'start'], [2, 'TOOL_CALL_START', ''], [3, 'execution_state', 'start'],
      [4, 'step_transition', 'succeed'], [5, 'TOOL_CALL_END', ''], [6, 'execution_state', 'succeed'],
    ]);
    expect(once.events[5]!.payload).toMatchObject({ from_status: 'running', to_status: 'completed', is_terminal: true, has_side_effects: false, action_summary: 'tool.pure → Step one', execution_id: true });
    expect(once.contract).toEqual({ status: 'completed', result: '{"answer":42}', error_message: null, version: 3 });
    expect(once.transitions).toEqual([
      { sequence_number: 0, from_status: 'pending', to_status: 'running', trigger: 'start', actor: 'tool_node', actor_category: 'tool' },
      { sequence_number: 1, from_status: 'running', to_status: 'completed', trigger: 'succeed', actor: 'tool_node', actor_category: 'tool' },
    ]);
    expect(once.memory.map((m) => [m.scope, m.key])).toEqual([['SESSION', 'execution_fact:EXE'], ['EPHEMERAL', 'step_context']]);
    expect(once.head).toEqual({ event_seq: 6, partial_result: { done: ['s1'] } });
  });

  it('commits a start and a later end in a call each, numbering the contract transitions on', async () => {
    await seed('tkt_sc_two');
    const start = runAndSucceed('tkt_sc_two');
    const started = await commitStep(em, { ...start, hops: [start.hops[0]!], output: undefined, capability: undefined, sideEffect: undefined, partialResult: undefined });
    expect(started).toMatchObject({ status: 'RUNNING', capability: 'tool.pure' });
    const calls: string[] = [];
    await commitStep(() => counted(calls), { ticket: 'tkt_sc_two', stepId: 's1', row: started, hops: [{ trigger: 'fail', message: 'it broke' }] });
    expect(calls).toHaveLength(1);
    const after = await records('tkt_sc_two');
    expect(after.step).toMatchObject({ status: 'FAILED', message: 'it broke' });
    expect(after.contract).toEqual({ status: 'failed', result: null, error_message: 'it broke', version: 3 });
    expect(after.transitions.map((t) => (t as { sequence_number: number }).sequence_number)).toEqual([0, 1]);
    expect(after.events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
  });

  it('writes nothing of a step a cancel skipped first, and is refused by the table as before', async () => {
    await seed('tkt_sc_skipped');
    await em().transactional((tx) => transitionStep(tx, 'tkt_sc_skipped', 's1', 'skip', { message: 'cancelled' }));
    const before = await records('tkt_sc_skipped');
    await expect(commitStep(em, runAndSucceed('tkt_sc_skipped'))).rejects.toMatchObject({ payload: { code: 'illegal_transition', details: { from: 'SKIPPED', trigger: 'start' } } });
    expect(await records('tkt_sc_skipped')).toEqual(before);
  });

  it('writes nothing, not even the step, when the execution contract is not where the step says', async () => {
    await seed('tkt_sc_contract');
    await em().execute("UPDATE execution_contracts SET status = 'cancelled' WHERE ticket = 'tkt_sc_contract'");
    const before = await records('tkt_sc_contract');
    await expect(commitStep(em, runAndSucceed('tkt_sc_contract'))).rejects.toMatchObject({ payload: { code: 'illegal_transition', details: { machine: 'execution_contract', from: 'cancelled' } } });
    expect(await records('tkt_sc_contract')).toEqual(before);
    expect(before.step).toMatchObject({ status: 'PENDING', started: false });
  });

  it('keeps the moves when the execution_fact cannot be written, and says why on the execution_state event', async () => {
    await seed('tkt_sc_fact');
    const e = em();
    await e.execute(`CREATE FUNCTION refuse_facts() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF starts_with(NEW.key, 'execution_fact:') THEN RAISE EXCEPTION 'facts are down'; END IF; RETURN NEW; END $$`);
    await e.execute('CREATE TRIGGER refuse_facts BEFORE INSERT ON memory FOR EACH ROW EXECUTE FUNCTION refuse_facts()');
    const calls: string[] = [];
    try {
      await commitStep(() => counted(calls), runAndSucceed('tkt_sc_fact'));
    } finally {
      await e.execute('DROP TRIGGER refuse_facts ON memory');
    }
    expect(calls).toHaveLength(1);
    const after = await records('tkt_sc_fact');
    expect(after.step).toMatchObject({ status: 'SUCCEEDED' });
    expect(after.memory.map((m) => m.key)).toEqual(['step_context']);
    const [start, end] = after.events.filter((ev) => ev.type === 'execution_state');
    expect(start!.payload.fact_error).toBeUndefined();
    expect(end!.payload.fact_error).toContain('facts are down');
  });
});

describe('the step commits of a batch', () => {
  const steps = ['s1', 's2', 's3'];
  const rows = (ticket: string) => em().execute<{ step_id: string; status: string; xid: string }[]>("SELECT step_id, status, xmin::text AS xid FROM ticket_steps WHERE ticket = ? ORDER BY position", [ticket]);
  const seqs = async (ticket: string) => (await em().execute<{ seq: number }[]>('SELECT seq FROM ticket_events WHERE ticket = ? ORDER BY seq', [ticket])).map((e) => e.seq);

  it('commits the steps ready in the same turn in one statement, each as its own commit writes it', async () => {
    await seed('tkt_sc_group', 'tool.pure', steps);
    const calls: string[] = [];
    const queue = new StepCommitQueue(() => counted(calls));
    const written = await Promise.all(steps.map((id) => queue.commit(runAndSucceed('tkt_sc_group', id))));
    expect(calls).toEqual(['SELECT * FROM abc_commit_steps($1::jsonb)']);
    expect(written.map((r) => [r.step_id, r.status])).toEqual(steps.map((id) => [id, 'SUCCEEDED']));
    const after = await rows('tkt_sc_group');
    expect(new Set(after.map((r) => r.xid)).size).toBe(1);
    expect(await seqs('tkt_sc_group')).toEqual(Array.from({ length: 18 }, (_, i) => i + 1));
    const [contracts] = await em().execute<{ n: number }[]>("SELECT count(*)::int AS n FROM execution_contracts WHERE ticket = 'tkt_sc_group' AND status = 'completed'");
    expect(contracts).toEqual({ n: 3 });
  });

  it('commits a step asked for while a group is written with the next group', async () => {
    await seed('tkt_sc_next', 'tool.pure', steps);
    const calls: string[] = [];
    const queue = new StepCommitQueue(() => counted(calls));
    const first = queue.commit(runAndSucceed('tkt_sc_next', 's1'));
    // The first has gone out, alone, and is being written.
    await new Promise((r) => setImmediate(r));
    const rest = [queue.commit(runAndSucceed('tkt_sc_next', 's2')), queue.commit(runAndSucceed('tkt_sc_next', 's3'))];
    await Promise.all([first, ...rest]);
    expect(calls).toEqual(['SELECT * FROM abc_commit_step($1::jsonb)', 'SELECT * FROM abc_commit_steps($1::jsonb)']);
    const after = await rows('tkt_sc_next');
    expect(after[1]!.xid).toBe(after[2]!.xid);
    expect(after[0]!.xid).not.toBe(after[1]!.xid);
  });

  it('commits the others alone when one step has moved on, and refuses that one as before', async () => {
    await seed('tkt_sc_moved', 'tool.pure', steps);
    await em().transactional((tx) => transitionStep(tx, 'tkt_sc_moved', 's2', 'skip', { message: 'cancelled' }));
    const queue = new StepCommitQueue(em);
    const settled = await Promise.allSettled(steps.map((id) => queue.commit(runAndSucceed('tkt_sc_moved', id))));
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((settled[1] as PromiseRejectedResult).reason).toMatchObject({ payload: { code: 'illegal_transition', details: { from: 'SKIPPED', trigger: 'start' } } });
    expect((await rows('tkt_sc_moved')).map((r) => r.status)).toEqual(['SUCCEEDED', 'SKIPPED', 'SUCCEEDED']);
  });
});

describe('a step commit a ticket move writes first', () => {
  const executing = (ticket: string) => em().execute("UPDATE tickets SET lifecycle_state = 'STEP_EXECUTION', status = 'RUNNING', phase = 'execute' WHERE ticket = ?", [ticket]);

  it('writes the step\'s records in the move\'s statement, their events ahead of the move\'s', async () => {
    await seed('tkt_sc_first');
    await seed('tkt_sc_alone');
    await executing('tkt_sc_first');
    const calls: string[] = [];
    const moved = await transitionTicket(counted(calls), 'tkt_sc_first', 'steps_settled', {}, 'engine', { from: 'STEP_EXECUTION', first: (ahead) => stepRecords([runAndSucceed('tkt_sc_first')], ahead)! });
    expect(calls).toHaveLength(1);
    expect(moved).toMatchObject({ lifecycle_state: 'STEP_REVIEW', event_seq: 7 });
    await commitStep(em, runAndSucceed('tkt_sc_alone'));
    const [written, alone] = [await records('tkt_sc_first'), await records('tkt_sc_alone')];
    expect({ ...written, events: written.events.slice(0, 6), head: undefined }).toEqual({ ...alone, head: undefined });
    expect(written.events[6]).toMatchObject({ seq: 7, type: 'STATE_TRANSITION', payload: { from: 'STEP_EXECUTION', to: 'STEP_REVIEW', phase: 'execute' } });
  });

  it('writes several steps\' records in the move\'s statement, as a group commit writes them, their events numbered on', async () => {
    const steps = ['s1', 's2'];
    await seed('tkt_sc_first_two', 'tool.pure', steps);
    await seed('tkt_sc_group_two', 'tool.pure', steps);
    await executing('tkt_sc_first_two');
    const calls: string[] = [];
    const moved = await transitionTicket(counted(calls), 'tkt_sc_first_two', 'steps_settled', {}, 'engine', { from: 'STEP_EXECUTION', first: (ahead) => stepRecords(steps.map((id) => runAndSucceed('tkt_sc_first_two', id)), ahead)! });
    expect(calls).toHaveLength(1);
    expect(moved).toMatchObject({ lifecycle_state: 'STEP_REVIEW', event_seq: 13 });
    await new StepCommitQueue(em).commit(runAndSucceed('tkt_sc_group_two', 's1'));
    await new StepCommitQueue(em).commit(runAndSucceed('tkt_sc_group_two', 's2'));
    const left = async (ticket: string) => ({
      ...(await stepsLeft(ticket)),
      events: (await em().execute<{ seq: number; type: string; payload: Record<string, unknown> }[]>('SELECT seq, type, payload FROM ticket_events WHERE ticket = ? ORDER BY seq', [ticket]))
        .map((e) => [e.seq, e.type, e.payload.step_id ?? e.payload.to_status ?? e.payload.to]),
    });
    const [together, grouped] = [await left('tkt_sc_first_two'), await left('tkt_sc_group_two')];
    expect(together.events).toHaveLength(13);
    expect(together.events.at(-1)).toEqual([13, 'STATE_TRANSITION', 'STEP_REVIEW']);
    expect({ ...together, events: together.events.slice(0, 12) }).toEqual(grouped);
    expect(together.events.slice(0, 12).map((e) => e[0])).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  });

  it('writes the steps of several hops in one call, each hop\'s step events ahead of its own transition', async () => {
    const steps = ['s1', 's2'];
    await seed('tkt_sc_hops', 'tool.pure', steps);
    await seed('tkt_sc_hops_group', 'tool.pure', steps);
    await executing('tkt_sc_hops');
    const calls: string[] = [];
    const [one, two] = steps.map((id) => (ahead: number) => stepRecords([runAndSucceed('tkt_sc_hops', id)], ahead)!);
    const moved = await transitionTicket(counted(calls), 'tkt_sc_hops', 'steps_settled', {}, 'engine', {
      from: 'STEP_EXECUTION',
      through: [{ trigger: 'steps_settled', first: one }, { trigger: 'review_passed' }],
      first: two,
    });
    expect(calls).toHaveLength(1);
    expect(calls[0]!.match(/abc_steps?_records\(/g)).toEqual(['abc_steps_records(']);
    expect(moved).toMatchObject({ lifecycle_state: 'STEP_REVIEW', event_seq: 15 });
    for (const id of steps) await new StepCommitQueue(em).commit(runAndSucceed('tkt_sc_hops_group', id));
    const events = await em().execute<{ seq: number; type: string; payload: Record<string, unknown> }[]>("SELECT seq, type, payload FROM ticket_events WHERE ticket = 'tkt_sc_hops' ORDER BY seq");
    expect(events.map((e) => [e.seq, e.type, e.payload.to ?? e.payload.to_status])).toEqual([
      [1, 'step_transition', 'RUNNING'], [2, 'TOOL_CALL_START', undefined], [3, 'execution_state', 'running'],
      [4, 'step_transition', 'SUCCEEDED'], [5, 'TOOL_CALL_END', undefined], [6, 'execution_state', 'completed'],
      [7, 'STATE_TRANSITION', 'STEP_REVIEW'], [8, 'STATE_TRANSITION', 'STEP_EXECUTION'],
      [9, 'step_transition', 'RUNNING'], [10, 'TOOL_CALL_START', undefined], [11, 'execution_state', 'running'],
      [12, 'step_transition', 'SUCCEEDED'], [13, 'TOOL_CALL_END', undefined], [14, 'execution_state', 'completed'],
      [15, 'STATE_TRANSITION', 'STEP_REVIEW'],
    ]);
    expect(await stepsLeft('tkt_sc_hops')).toEqual(await stepsLeft('tkt_sc_hops_group'));
  });

  it('writes the facts of several steps under one subtransaction', async () => {
    const steps = ['s1', 's2', 's3'];
    await seed('tkt_sc_facts_once', 'tool.pure', steps);
    await executing('tkt_sc_facts_once');
    // The subtransactions with a transaction id of their own, in this backend's transaction so far.
    const subtransactions = await em().transactional(async (tx) => {
      await transitionTicket(tx, 'tkt_sc_facts_once', 'steps_settled', {}, 'engine', { from: 'STEP_EXECUTION', first: (ahead) => stepRecords(steps.map((id) => runAndSucceed('tkt_sc_facts_once', id)), ahead)! });
      const [row] = await tx.execute<{ n: number }[]>('SELECT s.subxact_count AS n FROM pg_stat_get_backend_idset() b, pg_stat_get_backend_subxact(b) s WHERE pg_stat_get_backend_pid(b) = pg_backend_pid()');
      return row!.n;
    });
    expect(subtransactions).toBe(1);
    expect((await stepsLeft('tkt_sc_facts_once')).facts).toEqual(steps.map((subject_id) => ({ subject_id, status: 'completed' })));
  });

  it('keeps every fact it can write when one of several cannot, and says why on that step\'s execution_state event', async () => {
    const steps = ['s1', 's2', 's3'];
    await seed('tkt_sc_first_facts', 'tool.pure', steps);
    await executing('tkt_sc_first_facts');
    const e = em();
    await e.execute(`CREATE FUNCTION refuse_s2_fact() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
      IF NEW.key = 'execution_fact:' || (SELECT execution_id FROM execution_contracts WHERE ticket = 'tkt_sc_first_facts' AND subject_id = 's2') THEN RAISE EXCEPTION 's2''s fact is refused'; END IF;
      RETURN NEW; END $$`);
    await e.execute('CREATE TRIGGER refuse_s2_fact BEFORE INSERT ON memory FOR EACH ROW EXECUTE FUNCTION refuse_s2_fact()');
    try {
      await transitionTicket(em(), 'tkt_sc_first_facts', 'steps_settled', {}, 'engine', { from: 'STEP_EXECUTION', first: (ahead) => stepRecords(steps.map((id) => runAndSucceed('tkt_sc_first_facts', id)), ahead)! });
    } finally {
      await e.execute('DROP TRIGGER refuse_s2_fact ON memory; DROP FUNCTION refuse_s2_fact()');
    }
    expect((await stepsLeft('tkt_sc_first_facts')).facts).toEqual(['s1', 's3'].map((subject_id) => ({ subject_id, status: 'completed' })));
    const ends = await e.execute<{ subject: string; fact_error: string | null }[]>(
      "SELECT c.subject_id AS subject, v.payload->>'fact_error' AS fact_error FROM ticket_events v JOIN execution_contracts c ON c.execution_id = v.payload->>'execution_id' WHERE v.ticket = 'tkt_sc_first_facts' AND v.type = 'execution_state' AND (v.payload->>'is_terminal')::boolean ORDER BY v.seq",
    );
    expect(ends.map((x) => x.subject)).toEqual(steps);
    expect(ends[0]!.fact_error).toBeNull();
    expect(ends[1]!.fact_error).toContain("s2's fact is refused");
    expect(ends[2]!.fact_error).toBeNull();
    const [contracts] = await e.execute<{ n: number }[]>("SELECT count(*)::int AS n FROM execution_contracts WHERE ticket = 'tkt_sc_first_facts' AND status = 'completed'");
    expect(contracts).toEqual({ n: 3 });
  });

  it.each([
    {
      what: "one step's contract is not where its step says",
      ticket: 'tkt_sc_first_contract',
      spoil: (ticket: string) => em().execute("UPDATE execution_contracts SET status = 'cancelled' WHERE ticket = ? AND subject_id = 's2'", [ticket]),
      left: ['PENDING', 'PENDING'],
    },
    {
      what: 'one of them has moved on',
      ticket: 'tkt_sc_first_one_skipped',
      spoil: (ticket: string) => em().transactional((tx) => transitionStep(tx, ticket, 's2', 'skip', { message: 'cancelled' })),
      left: ['PENDING', 'SKIPPED'],
    },
  ])('writes nothing of several steps, the move neither, when $what', async ({ ticket, spoil, left }) => {
    const steps = ['s1', 's2'];
    await seed(ticket, 'tool.pure', steps);
    await executing(ticket);
    await spoil(ticket);
    const before = await records(ticket);
    await expect(
      transitionTicket(em(), ticket, 'steps_settled', {}, 'engine', { from: 'STEP_EXECUTION', first: (ahead) => stepRecords(steps.map((id) => runAndSucceed(ticket, id)), ahead)! }),
    ).rejects.toMatchObject({ code: 'ABC01' });
    expect(await records(ticket)).toEqual(before);
    const statuses = await em().execute<{ status: string }[]>('SELECT status FROM ticket_steps WHERE ticket = ? ORDER BY step_id', [ticket]);
    expect(statuses.map((r) => r.status)).toEqual(left);
    const [row] = await em().execute('SELECT lifecycle_state FROM tickets WHERE ticket = ?', [ticket]);
    expect(row).toEqual({ lifecycle_state: 'STEP_EXECUTION' });
  });

  it('writes nothing, the move neither, when the step has moved on', async () => {
    await seed('tkt_sc_first_skipped');
    await executing('tkt_sc_first_skipped');
    await em().transactional((tx) => transitionStep(tx, 'tkt_sc_first_skipped', 's1', 'skip', { message: 'cancelled' }));
    const before = await records('tkt_sc_first_skipped');
    await expect(transitionTicket(em(), 'tkt_sc_first_skipped', 'steps_settled', {}, 'engine', { from: 'STEP_EXECUTION', first: (ahead) => stepRecords([runAndSucceed('tkt_sc_first_skipped')], ahead)! })).rejects.toMatchObject({ code: 'ABC01' });
    expect(await records('tkt_sc_first_skipped')).toEqual(before);
    const [ticket] = await em().execute('SELECT lifecycle_state FROM tickets WHERE ticket = ?', ['tkt_sc_first_skipped']);
    expect(ticket).toEqual({ lifecycle_state: 'STEP_EXECUTION' });
  });

  it('writes none of the step\'s records when the move is refused', async () => {
    await seed('tkt_sc_first_refused');
    const before = await records('tkt_sc_first_refused');
    await expect(transitionTicket(em(), 'tkt_sc_first_refused', 'steps_settled', {}, 'engine', { from: 'STEP_EXECUTION', first: (ahead) => stepRecords([runAndSucceed('tkt_sc_first_refused')], ahead)! })).rejects.toMatchObject({ payload: { code: 'illegal_transition' } });
    expect(await records('tkt_sc_first_refused')).toEqual(before);
  });
});
