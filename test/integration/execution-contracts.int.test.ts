// The execution-contract writer: machine-checked moves, transitions in the
// caller's transaction, and a best-effort execution_fact.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { moveContract, moveContractThrough, openContract } from '../../src/store/execution-contracts.js';
import { migratedOrm } from '../support/db.js';

let store: Awaited<ReturnType<typeof migratedOrm>>;

beforeAll(async () => {
  store = await migratedOrm();
});
afterAll(async () => store?.close());

const open = (subjectId: string) =>
  store.orm.em.fork().transactional((tx) =>
    openContract(tx, { sessionId: 'sess-ec', runId: 'run-ec', subjectId, actionType: 'tool_call', actionSummary: 'files.delete → /tmp/x', irreversible: true }),
  );
const move = (subjectId: string, trigger: 'start' | 'succeed' | 'resume') =>
  store.orm.em.fork().transactional((tx) => moveContract(tx, { runId: 'run-ec', subjectId }, trigger, 'tool_node', trigger === 'succeed' ? { result: 'deleted' } : {}));

it('refuses a move the table does not allow, and writes nothing for it', async () => {
  const id = await open('tc-1');
  await expect(move('tc-1', 'resume')).rejects.toMatchObject({ payload: { code: 'illegal_transition' } });
  const rows = await store.orm.em.fork().execute<{ n: number }[]>('SELECT count(*)::int AS n FROM execution_transitions WHERE execution_id = ?', [id]);
  expect(rows[0]!.n).toBe(0);
});

it('keeps the transition when the execution_fact cannot be written, and says why on the execution_state event', async () => {
  await open('tc-2');
  await move('tc-2', 'start');
  const em = store.orm.em.fork();
  await em.execute(`CREATE FUNCTION refuse_memory() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'memory is down'; END $$`);
  await em.execute('CREATE TRIGGER refuse_memory BEFORE INSERT ON memory FOR EACH ROW EXECUTE FUNCTION refuse_memory()');
  try {
    const state = await move('tc-2', 'succeed');
    expect(state).toMatchObject({ from_status: 'running', to_status: 'completed', is_terminal: true, has_side_effects: true });
    expect(state!.fact_error).toContain('memory is down');
    const [row] = await em.execute<{ status: string; result: string }[]>("SELECT status, result FROM execution_contracts WHERE subject_id = 'tc-2'");
    expect(row).toEqual({ status: 'completed', result: 'deleted' });
  } finally {
    await em.execute('DROP TRIGGER refuse_memory ON memory');
  }
  await open('tc-3');
  await move('tc-3', 'start');
  await move('tc-3', 'succeed');
  const facts = await em.execute<{ key: string }[]>("SELECT key FROM memory WHERE scope_id = 'sess-ec'");
  expect(facts).toHaveLength(1);
});

it('moves in one statement, numbers its transitions in order, and a move that lost a race to the row is refused by the table', async () => {
  const id = await open('tc-4');
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let moved!: () => void;
  const first = new Promise<void>((r) => (moved = r));
  // A starts the contract and holds its row; B's start waits on the lock, then finds it running.
  const a = store.orm.em.fork().transactional(async (tx) => {
    await moveContract(tx, { runId: 'run-ec', subjectId: 'tc-4' }, 'start', 'tool_node');
    moved();
    await held;
  });
  await first;
  const b = move('tc-4', 'start');
  await new Promise((r) => setTimeout(r, 100));
  release();
  await a;
  await expect(b).rejects.toMatchObject({ payload: { code: 'illegal_transition', details: { from: 'running', trigger: 'start' } } });
  await move('tc-4', 'succeed');
  const rows = await store.orm.em.fork().execute<{ sequence_number: number; from_status: string; to_status: string }[]>(
    'SELECT sequence_number, from_status, to_status FROM execution_transitions WHERE execution_id = ? ORDER BY sequence_number',
    [id],
  );
  expect(rows).toEqual([
    { sequence_number: 0, from_status: 'pending', to_status: 'running' },
    { sequence_number: 1, from_status: 'running', to_status: 'completed' },
  ]);
});

it('takes several hops in one write: a transition record and an event for each, in order, and nothing when one hop is refused', async () => {
  const id = await open('tc-5');
  const where = { runId: 'run-ec', subjectId: 'tc-5' };
  const through = (moves: { trigger: 'start' | 'suspend' | 'resume' | 'succeed'; actor: string }[], outcome = {}) =>
    store.orm.em.fork().transactional((tx) => moveContractThrough(tx, where, moves, outcome));
  const transitions = () =>
    store.orm.em.fork().execute<Record<string, unknown>[]>('SELECT sequence_number, from_status, to_status, trigger, actor, actor_category FROM execution_transitions WHERE execution_id = ? ORDER BY sequence_number', [id]);

  const suspended = await through([{ trigger: 'start', actor: 'ecs_node' }, { trigger: 'suspend', actor: 'ecs_node' }]);
  expect(suspended.map((e) => [e.execution_id, e.from_status, e.to_status, e.trigger, e.is_resumable])).toEqual([
    [id, 'pending', 'running', 'start', false],
    [id, 'running', 'waiting', 'suspend', true],
  ]);
  expect(suspended[0]!.timestamp).toBeLessThan(suspended[1]!.timestamp);

  // resume then start: the second hop is refused from running, and neither is written.
  await expect(through([{ trigger: 'resume', actor: 'human' }, { trigger: 'start', actor: 'ecs_node' }])).rejects.toMatchObject({
    payload: { code: 'illegal_transition', details: { from: 'running', trigger: 'start' } },
  });
  expect(await transitions()).toHaveLength(2);

  const done = await through([{ trigger: 'resume', actor: 'human' }, { trigger: 'succeed', actor: 'ecs_node' }], { result: 'confirmed' });
  expect(done.map((e) => [e.to_status, e.is_terminal, e.actor_category, e.fact_error])).toEqual([
    ['running', false, 'human', undefined],
    ['completed', true, 'system', undefined],
  ]);
  expect(await transitions()).toEqual([
    { sequence_number: 0, from_status: 'pending', to_status: 'running', trigger: 'start', actor: 'ecs_node', actor_category: 'system' },
    { sequence_number: 1, from_status: 'running', to_status: 'waiting', trigger: 'suspend', actor: 'ecs_node', actor_category: 'system' },
    { sequence_number: 2, from_status: 'waiting', to_status: 'running', trigger: 'resume', actor: 'human', actor_category: 'human' },
    { sequence_number: 3, from_status: 'running', to_status: 'completed', trigger: 'succeed', actor: 'ecs_node', actor_category: 'system' },
  ]);
  const [row] = await store.orm.em.fork().execute<{ status: string; result: string; version: number }[]>('SELECT status, result, version FROM execution_contracts WHERE execution_id = ?', [id]);
  expect(row).toEqual({ status: 'completed', result: 'confirmed', version: 5 });
  const facts = await store.orm.em.fork().execute<{ n: number }[]>("SELECT count(*)::int AS n FROM memory WHERE key = 'execution_fact:' || ?", [id]);
  expect(facts[0]!.n).toBe(1);
});
