// Seed 004's worked example through the observer's pure views, field by field:
// a confirmation (ecs_request) suspended and resumed, then an irreversible
// e-mail send. T is milliseconds from the user's input.
import { describe, expect, it } from 'vitest';
import type { ExecutionState } from '../../src/domain/execution-contract.machine.js';
import { actorCategory, consequenceViews, executionFact, renderConsequences, snapshot, timeline, type ContractRow, type TransitionRow } from '../../src/domain/execution-views.js';

const T0 = Date.UTC(2024, 1, 8, 0, 0, 0);
const at = (ms: number) => new Date(T0 + ms);

const ecs = (status: ExecutionState, enteredMs: number): ContractRow => ({
  execution_id: 'exec-001', session_id: 'session-abc', run_id: null, action_type: 'ecs_request',
  action_summary: '确认发送邮件给 bob@example.com', status, irreversible: false, idempotency_key: null, timeout_seconds: null,
  result: status === 'completed' ? 'confirmed' : null, error_message: null, created_at: at(200), entered_at: at(enteredMs),
});
const email = (status: ExecutionState, enteredMs: number): ContractRow => ({
  execution_id: 'exec-002', session_id: 'session-abc', run_id: null, action_type: 'tool_call',
  action_summary: 'email.send → bob@example.com', status, irreversible: true, idempotency_key: 'email:send:a1b2c3d4', timeout_seconds: 30,
  result: status === 'completed' ? '邮件已发送' : null, error_message: null, created_at: at(5100), entered_at: at(enteredMs),
});
const move = (id: string, n: number, from: ExecutionState, to: ExecutionState, trigger: string, actor: string, ms: number): TransitionRow =>
  ({ execution_id: id, sequence_number: n, from_status: from, to_status: to, trigger, actor, actor_category: actorCategory(actor), ts: at(ms) });

const ECS = [
  move('exec-001', 0, 'pending', 'running', 'start', 'ecs_node', 210),
  move('exec-001', 1, 'running', 'waiting', 'suspend', 'ecs_node', 210),
  move('exec-001', 2, 'waiting', 'running', 'resume', 'graph_runner', 5010),
  move('exec-001', 3, 'running', 'completed', 'succeed', 'graph_runner', 5010),
];
const EMAIL = [
  move('exec-002', 0, 'pending', 'running', 'start', 'tool_node', 5110),
  move('exec-002', 1, 'running', 'completed', 'succeed', 'tool_node', 5500),
];

describe('the seed 004 worked example', () => {
  it('snapshots exec-001 at T=200 (pending) and T=220 (waiting)', () => {
    expect(snapshot(ecs('pending', 200), [], T0 + 200)).toMatchObject({
      execution_id: 'exec-001', action_summary: '确认发送邮件给 bob@example.com', current_status: 'pending',
      is_terminal: false, is_stable: false, is_resumable: false, has_side_effects: false, transition_count: 0,
    });
    expect(snapshot(ecs('waiting', 210), ECS.slice(0, 2), T0 + 220)).toMatchObject({
      execution_id: 'exec-001', current_status: 'waiting', is_stable: true, is_resumable: true,
      duration_in_state_ms: 10, transition_count: 2, last_actor: 'ecs_node', last_trigger: 'suspend',
    });
  });

  it('numbers the transitions from 0 with their triggers and actor categories', () => {
    const t = timeline('session-abc', [ecs('completed', 5010), email('completed', 5500)], [...EMAIL, ...ECS], T0 + 5600).transitions;
    expect(t.map((x) => [x.execution_id, x.sequence_number, `${x.from_status}→${x.to_status}`, x.trigger, x.actor, x.actor_category])).toEqual([
      ['exec-001', 0, 'pending→running', 'start', 'ecs_node', 'system'],
      ['exec-001', 1, 'running→waiting', 'suspend', 'ecs_node', 'system'],
      ['exec-001', 2, 'waiting→running', 'resume', 'graph_runner', 'system'],
      ['exec-001', 3, 'running→completed', 'succeed', 'graph_runner', 'system'],
      ['exec-002', 0, 'pending→running', 'start', 'tool_node', 'tool'],
      ['exec-002', 1, 'running→completed', 'succeed', 'tool_node', 'tool'],
    ]);
    expect(t.map((x) => x.is_terminal_transition)).toEqual([false, false, false, true, false, true]);
  });

  it('gives the consequence views and the prompt text of the seed', () => {
    const views = consequenceViews([email('completed', 5500), ecs('completed', 5010)], [...ECS, ...EMAIL]);
    expect(views).toEqual([
      {
        execution_id: 'exec-001', action_type: 'ecs_request', action_summary: '确认发送邮件给 bob@example.com', consequence_label: 'SUCCESS',
        result: 'confirmed', error_message: null, has_side_effects: false, was_suspended: true, is_still_pending: false, total_duration_ms: 4810,
      },
      {
        execution_id: 'exec-002', action_type: 'tool_call', action_summary: 'email.send → bob@example.com', consequence_label: 'SUCCESS',
        result: '邮件已发送', error_message: null, has_side_effects: true, was_suspended: false, is_still_pending: false, total_duration_ms: 400,
      },
    ]);
    expect(renderConsequences(views)).toBe('[SUCCESS ⚠️ IRREVERSIBLE] email.send → bob@example.com: 邮件已发送');
    // Views carry neither idempotency keys nor action details.
    expect(JSON.stringify(views)).not.toContain('email:send:a1b2c3d4');
  });

  it('builds the session timeline with its counts and bounds', () => {
    const view = timeline('session-abc', [email('completed', 5500), ecs('completed', 5010)], [...ECS, ...EMAIL], T0 + 5600);
    expect(view).toMatchObject({
      session_id: 'session-abc', total_contracts: 2, terminal_contracts: 2, active_contracts: 0,
      has_suspended: false, has_irreversible_completed: true, started_at: (T0 + 200) / 1000, ended_at: (T0 + 5500) / 1000,
    });
    expect(view.contracts.map((c) => c.execution_id)).toEqual(['exec-001', 'exec-002']);
    // Transitions in any order come back by time, ties by sequence number.
    const shuffled = timeline('session-abc', [ecs('completed', 5010), email('completed', 5500)], [...ECS, ...EMAIL].reverse(), T0 + 5600);
    expect(shuffled.transitions.map((t) => `${t.execution_id}:${t.sequence_number}`)).toEqual(['exec-001:0', 'exec-001:1', 'exec-001:2', 'exec-001:3', 'exec-002:0', 'exec-002:1']);
    expect(consequenceViews([email('completed', 5500), ecs('completed', 5010)], [...ECS, ...EMAIL]).map((v) => v.execution_id)).toEqual(['exec-001', 'exec-002']);
    const open = timeline('session-abc', [ecs('waiting', 210)], ECS.slice(0, 2), T0 + 220);
    expect(open).toMatchObject({ active_contracts: 1, has_suspended: true, ended_at: null });
  });

  it('bounds a session with more finished contracts than a call takes arguments', () => {
    const many = Array.from({ length: 150_000 }, (_, i) => ({ ...email('completed', 6000 + i), execution_id: `exec-${i}` }));
    const view = timeline('session-abc', many, [], T0 + 200_000);
    expect(view).toMatchObject({ total_contracts: 150_000, terminal_contracts: 150_000, ended_at: (T0 + 6000 + 149_999) / 1000 });
  });

  it('writes the execution facts of the seed', () => {
    expect(executionFact(ecs('completed', 5010), ECS)).toMatchObject({ type: 'execution_fact', final_status: 'completed', irreversible: false, duration_ms: 4810 });
    expect(executionFact(email('completed', 5500), EMAIL)).toMatchObject({ final_status: 'completed', irreversible: true, duration_ms: 400, result_summary: '邮件已发送' });
    const long = { ...email('failed', 5500), error_message: 'x'.repeat(500) };
    expect((executionFact(long, EMAIL).error_summary as string).length).toBe(200);
  });

  it('labels every status, and renders failures with their error', () => {
    const states: ExecutionState[] = ['pending', 'running', 'waiting', 'completed', 'failed', 'rejected', 'cancelled'];
    const views = consequenceViews(states.map((s, i) => ({ ...email(s, 5500), execution_id: `e${i}`, error_message: s === 'completed' ? null : `${s}!` })), []);
    expect(views.map((v) => v.consequence_label)).toEqual(['NOT_STARTED', 'IN_PROGRESS', 'WAITING', 'SUCCESS', 'FAILED', 'REJECTED', 'CANCELLED']);
    expect(renderConsequences(views).split('\n')).toEqual([
      '[SUCCESS ⚠️ IRREVERSIBLE] email.send → bob@example.com: 邮件已发送',
      '[FAILED] email.send → bob@example.com: failed!',
      '[REJECTED] email.send → bob@example.com: rejected!',
      '[CANCELLED] email.send → bob@example.com: cancelled!',
    ]);
    expect(actorCategory('someone_new')).toBe('system');
  });
});
