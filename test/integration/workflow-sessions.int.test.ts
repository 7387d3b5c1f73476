// A workflow session's phase moves only through its machine, in one
// transaction with its audit record and the next phase's carryover; an
// illegal move changes nothing and is recorded as refused.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { phaseMachine, type WorkflowDefinition } from '../../src/domain/workflow.js';
import { movePhase, openWorkflowSession, phaseTransitions, startTurn } from '../../src/store/workflow-sessions.js';
import type { Orm } from '../../src/store/orm.js';
import { migratedOrm } from '../support/db.js';

let store: Awaited<ReturnType<typeof migratedOrm>>;
let orm: Orm;
const def: WorkflowDefinition = JSON.parse(readFileSync('workflows/wealth-onboarding/1.0.0.json', 'utf8'));
const machine = phaseMachine(def);
let n = 0;

beforeAll(async () => {
  store = await migratedOrm();
  orm = store.orm;
});
afterAll(() => store.close());

async function session(): Promise<string> {
  const sessionId = `sess_wf_${++n}`;
  await orm.em.fork().transactional((tx) => openWorkflowSession(tx, { sessionId, tenantId: 'default', workflowId: def.workflow_id, version: def.version, initialPhase: def.initial_phase }));
  return sessionId;
}
const phaseOf = async (sessionId: string) => (await orm.em.fork().execute<{ phase: string }[]>('SELECT phase FROM workflow_sessions WHERE session_id = ?', [sessionId]))[0]!.phase;

describe('a workflow session', () => {
  it('starts in the initial phase and opens once', async () => {
    const id = await session();
    const again = await orm.em.fork().transactional((tx) => openWorkflowSession(tx, { sessionId: id, tenantId: 'default', workflowId: def.workflow_id, version: def.version, initialPhase: 'strategy' }));
    expect(again).toMatchObject({ phase: 'kyc', workflow_version: '1.0.0', carryover: null, phase_turns: {} });
  });

  it('moves by its table, with the audit record and the carryover in the same transaction', async () => {
    const id = await session();
    const moved = await orm.em.fork().transactional((tx) =>
      movePhase(tx, machine, { sessionId: id, to: 'pre_strategy', trigger: 'handler_completed', actor: 'handler', reason: 'the client profile is complete', carryover: 'risk: medium', metadata: { missing_fields: [] }, runId: 'run_1' }),
    );
    expect(moved).toEqual({ ok: true, value: { from: 'kyc', to: 'pre_strategy' } });
    expect(await phaseOf(id)).toBe('pre_strategy');
    expect(await phaseTransitions(orm.em.fork(), id)).toEqual([
      expect.objectContaining({ from_phase: 'kyc', to_phase: 'pre_strategy', trigger: 'handler_completed', actor: 'handler', reason: 'the client profile is complete', accepted: true, run_id: 'run_1', metadata: { missing_fields: [] } }),
    ]);
    // The carryover is given to the next turn, again if that turn resumes, and to no later turn.
    const start = (runId: string) => orm.em.fork().transactional((tx) => startTurn(tx, id, runId));
    expect(await start('run_2')).toEqual({ turn: 1, carryover: 'risk: medium' });
    expect(await start('run_2')).toEqual({ turn: 1, carryover: 'risk: medium' });
    expect(await start('run_3')).toEqual({ turn: 2, carryover: null });
  });

  it('refuses a move its table does not allow, changes nothing, and records the refusal', async () => {
    const id = await session();
    const refused = await orm.em.fork().transactional((tx) => movePhase(tx, machine, { sessionId: id, to: 'deployment', trigger: 'route', actor: 'client', reason: 'skip ahead' }));
    expect(refused).toMatchObject({ ok: false, error: { payload: { code: 'illegal_transition', details: { machine: 'workflow:wealth-onboarding@1.0.0', from: 'kyc', trigger: 'route:deployment' } } } });
    expect(await phaseOf(id)).toBe('kyc');
    expect(await phaseTransitions(orm.em.fork(), id)).toEqual([
      expect.objectContaining({ from_phase: 'kyc', to_phase: 'deployment', trigger: 'route', accepted: false, metadata: { refused: expect.stringContaining('not allowed') } }),
    ]);
  });

  it('rolls the move back with the transaction it is part of', async () => {
    const id = await session();
    await expect(
      orm.em.fork().transactional(async (tx) => {
        await movePhase(tx, machine, { sessionId: id, to: 'pre_strategy', trigger: 'handler_completed', actor: 'handler', reason: 'done' });
        throw new Error('the turn failed after the move');
      }),
    ).rejects.toThrow('the turn failed');
    expect(await phaseOf(id)).toBe('kyc');
    expect(await phaseTransitions(orm.em.fork(), id)).toEqual([]);
  });

  it('counts turns per phase, a run once', async () => {
    const id = await session();
    let turn = 0;
    const count = async (runId = `run_${++turn}`) => (await orm.em.fork().transactional((tx) => startTurn(tx, id, runId))).turn;
    expect([await count(), await count()]).toEqual([1, 2]);
    // A resumed turn (the same run) is not counted again.
    expect(await count('run_2')).toBe(2);
    await orm.em.fork().transactional((tx) => movePhase(tx, machine, { sessionId: id, to: 'pre_strategy', trigger: 'handler_completed', actor: 'handler', reason: 'done' }));
    expect(await count()).toBe(1);
    const [row] = await orm.em.fork().execute<{ phase_turns: Record<string, number> }[]>('SELECT phase_turns FROM workflow_sessions WHERE session_id = ?', [id]);
    expect(row!.phase_turns).toEqual({ kyc: 2, pre_strategy: 1 });
  });

  it('keeps its audit insert-only', async () => {
    await expect(orm.em.fork().execute("UPDATE phase_transitions SET accepted = true WHERE accepted = false")).rejects.toThrow(/immutable/);
  });
});
