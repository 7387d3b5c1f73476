// The seed 002 engine on real contract executions: parallel steps with a
// failure, LOCAL and GLOBAL replans, rollback around a side effect, WAIT_HUMAN
// answered and timed out, halting after N failures, a role × tool denial, and
// memory that later executions consult. Tools are real HTTP webhooks.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { importSamplePortfolios, pollUntilDone, referenceAssembly, request } from '../support/contracts.js';
import { startToolServer, toolError, type ToolServer } from '../support/tool-server.js';
import { SUCCESS_CASES_KEPT } from '../../src/store/memory.js';

let s: TestStack;
let tools: ToolServer;
let minor = 10;

beforeAll(async () => {
  tools = await startToolServer();
  s = await startTestStack({ contracts: { workers: 2, leaseMs: 2000 } });
  await importSamplePortfolios(s.orm);
});
afterAll(async () => {
  await s?.close();
  await tools?.close();
});

type Json = Record<string, any>;

async function tool(name: string, opts: Json = {}, on = s): Promise<void> {
  const res = await on.http('/v1/tools/register', { method: 'POST', json: { name, kind: 'http', endpoint: tools.endpoint(name), timeout_ms: 5000, ...opts } });
  expect(res.status, await res.clone().text()).toBe(200);
}

/** Registers the reference assembly plus `steps` as the newest version (executions pick the newest). */
async function assembly(steps: Json[], engine?: Json, on = s): Promise<string> {
  const a = referenceAssembly();
  a.version = `1.${minor++}.0`;
  for (const cap of new Set(steps.flatMap((x) => [x.tool_name, x.fallback_tool].filter(Boolean)))) a.capabilities.push({ name: cap, kind: 'TOOL' });
  a.steps.push(...steps.map((x) => ({ label: x.id, input: {}, dependencies: ['value_positions'], ...x })));
  if (engine) a.engine = engine;
  const res = await on.http('/v1/assemblies', { method: 'POST', json: a });
  expect(res.status, await res.clone().text()).toBe(201);
  return a.version;
}

async function submit(on = s): Promise<string> {
  const res = await on.http('/v1/contracts:submit', { method: 'POST', json: request({ execution_preferences: { progress_granularity: 'step' } }) });
  expect(res.status).toBe(202);
  return (await res.json()).task.ticket;
}

const run = async () => pollUntilDone(s.http, await submit());
const trace = async (ticket: string, types = ''): Promise<Json[]> => (await (await s.http(`/v1/tickets/${ticket}/trace${types && `?types=${types}`}`)).json()).events;
const context = async (ticket: string): Promise<Json> => (await s.http(`/v1/tickets/${ticket}/context`)).json();
const stepsOf = (poll: Json): Record<string, string> => Object.fromEntries(poll.progress.steps.map((x: Json) => [x.step_id, x.status]));
const starts = (events: Json[], step: string) => events.filter((e) => e.type === 'step_transition' && e.payload.step_id === step && ['start', 'restart'].includes(e.payload.trigger)).length;
const plansOf = async (ticket: string) =>
  (await s.orm.em.fork().execute<{ plan: Json }[]>('SELECT plan FROM frozen_plans WHERE ticket = ? ORDER BY created_at', [ticket])).map((r) => r.plan);
const lifecycle = (events: Json[]) => events.filter((e) => e.type === 'STATE_TRANSITION').map((e) => e.payload.to);

describe('parallel DAG steps', () => {
  it('runs ready steps at once; a failing step does not orphan a running sibling', async () => {
    await tool('slow');
    await tool('boom');
    tools.script('slow', { delayMs: 400, body: { slow: true } });
    tools.script('boom', { delayMs: 50, ...toolError('BOOM', 'HALT') });
    await assembly([{ id: 'slow', tool_name: 'tool.slow' }, { id: 'boom', tool_name: 'tool.boom' }], { max_active_steps: 8 });
    const done = await run();
    expect(done.status).toBe('FAILED');
    expect(done.error).toMatchObject({ code: 'BOOM', category: 'EXECUTION', retryable: false });
    // The sibling finished and was recorded; what depends on the failure never started.
    expect(stepsOf(done)).toMatchObject({ slow: 'SUCCEEDED', boom: 'FAILED', highlights: 'SKIPPED' });
    const events = await trace(done.ticket);
    const boomStart = events.find((e) => e.type === 'TOOL_CALL_START' && e.payload.step_id === 'boom')!;
    expect(boomStart.payload.active_steps).toEqual(expect.arrayContaining(['boom', 'slow']));
    const ends = events.filter((e) => e.type === 'TOOL_CALL_END').map((e) => [e.payload.step_id, e.payload.success]);
    expect(ends).toEqual(expect.arrayContaining([['slow', true], ['boom', false]]));
    expect(lifecycle(events)).toEqual(expect.arrayContaining(['STEP_EXECUTION', 'STEP_REVIEW', 'FAILED']));
  });

  it('tracks parallel steps in active_steps, up to max_active_steps', async () => {
    await tool('gate');
    tools.script('gate', { hold: true, body: { open: true } });
    await assembly([{ id: 'gate_a', tool_name: 'tool.gate' }, { id: 'gate_b', tool_name: 'tool.gate' }], { max_active_steps: 8 });
    const ticket = await submit();
    await expect.poll(() => tools.held('gate'), { timeout: 5000 }).toBe(2);
    // Steps without side effects are recorded as started once they have run for START_DEFER_MS.
    await expect.poll(async () => (await context(ticket)).execution_context.active_steps).toMatchObject({ gate_a: 'RUNNING', gate_b: 'RUNNING', load_portfolio: 'SUCCEEDED' });
    expect((await context(ticket)).global_state).toMatchObject({ execution_id: ticket, lifecycle_state: 'STEP_EXECUTION', iteration_count: 0 });
    tools.release('gate');
    expect((await pollUntilDone(s.http, ticket)).status).toBe('SUCCEEDED');

    // With one slot, the two gates never run together.
    await assembly([{ id: 'gate_a', tool_name: 'tool.gate' }, { id: 'gate_b', tool_name: 'tool.gate' }], { max_active_steps: 1 });
    const serial = await submit();
    await expect.poll(() => tools.held('gate'), { timeout: 5000 }).toBe(1);
    await new Promise((r) => setTimeout(r, 200));
    expect(tools.held('gate')).toBe(1);
    tools.release('gate');
    await expect.poll(() => tools.held('gate'), { timeout: 5000 }).toBe(1);
    tools.release('gate');
    expect((await pollUntilDone(s.http, serial)).status).toBe('SUCCEEDED');
    tools.script('gate', { body: { open: true } });
  });
});

describe('when a step end is committed', () => {
  it('commits alone, after ABC_STEP_START_DEFER_MS, the end of a step without side effects whose batch runs on, and the reviews before it first', async () => {
    await tool('quick');
    await tool('gate');
    tools.script('quick', { body: { quick: true } });
    tools.script('gate', { hold: true, body: { open: true } });
    await assembly([{ id: 'quick', tool_name: 'tool.quick' }, { id: 'gate', tool_name: 'tool.gate' }], { max_active_steps: 8 });
    const ticket = await submit();
    await expect.poll(() => tools.held('gate'), { timeout: 5000 }).toBe(1);
    const status = async (step: string) => (await s.orm.em.fork().execute<{ status: string }[]>('SELECT status FROM ticket_steps WHERE ticket = ? AND step_id = ?', [ticket, step]))[0]?.status;
    // Committed while its sibling still runs: pollers see it done.
    await expect.poll(() => status('quick'), { timeout: 5000 }).toBe('SUCCEEDED');
    expect(await status('gate')).toBe('RUNNING');
    // The batches before, whose reviews waited to go out with this one's, went out first, in order.
    expect(await status('value_positions')).toBe('SUCCEEDED');
    const moves = await s.orm.em.fork().execute<{ to: string }[]>("SELECT payload->>'to' AS to FROM ticket_events WHERE ticket = ? AND type = 'STATE_TRANSITION' ORDER BY seq", [ticket]);
    expect(moves.map((m) => m.to).slice(-4)).toEqual(['STEP_REVIEW', 'STEP_EXECUTION', 'STEP_REVIEW', 'STEP_EXECUTION']);
    tools.release('gate');
    expect((await pollUntilDone(s.http, ticket)).status).toBe('SUCCEEDED');
    tools.script('gate', { body: { open: true } });
  });
});

describe('when a step start is committed', () => {
  // Its own core, where a step without side effects may run a minute before its start is committed.
  let deferred: TestStack;
  beforeAll(async () => {
    deferred = await startTestStack({ contracts: { workers: 2, leaseMs: 2000, stepStartDeferMs: 60_000 } });
    await importSamplePortfolios(deferred.orm);
  });
  afterAll(() => deferred?.close());

  /** The transaction each of a step's moves committed in, by trigger. */
  const commitsOf = async (ticket: string, step: string) =>
    Object.fromEntries(
      (await deferred.orm.em.fork().execute<{ trigger: string; tx: string }[]>("SELECT payload->>'trigger' AS trigger, xmin::text AS tx FROM ticket_events WHERE ticket = ? AND type = 'step_transition' AND payload->>'step_id' = ? ORDER BY seq", [ticket, step])).map((r) => [r.trigger, r.tx]),
    );

  it('commits the start and end of a step without side effects together, and a side effect\'s start before it runs', async () => {
    await tool('pure', {}, deferred);
    await tool('writes', { side_effect: true }, deferred);
    tools.script('pure', { body: { pure: true } });
    tools.script('writes', { body: { written: true } });
    await assembly([{ id: 'pure', tool_name: 'tool.pure' }, { id: 'writes', tool_name: 'tool.writes' }], undefined, deferred);
    const done = await pollUntilDone(deferred.http, await submit(deferred));
    expect(done.status).toBe('SUCCEEDED');
    const pure = await commitsOf(done.ticket, 'pure');
    expect(Object.keys(pure)).toEqual(['start', 'succeed']);
    expect(pure.start).toBe(pure.succeed);
    const writes = await commitsOf(done.ticket, 'writes');
    expect(Object.keys(writes)).toEqual(['start', 'succeed']);
    expect(writes.start).not.toBe(writes.succeed);
    // A side effect's end commits when it ends, never left to its batch's review.
    const [review] = await deferred.orm.em.fork().execute<{ tx: string }[]>("SELECT xmin::text AS tx FROM ticket_events WHERE ticket = ? AND type = 'STATE_TRANSITION' AND payload->>'to' = 'STEP_REVIEW'", [done.ticket]);
    expect(writes.succeed).not.toBe(review!.tx);
  });

  it("writes the ends of a batch's steps without side effects in its review's statement, all of them", async () => {
    await tool('pure', {}, deferred);
    tools.script('pure', { body: { pure: true } });
    await assembly([{ id: 'pure_a', tool_name: 'tool.pure' }, { id: 'pure_b', tool_name: 'tool.pure' }], { max_active_steps: 8 }, deferred);
    const done = await pollUntilDone(deferred.http, await submit(deferred));
    expect(done.status).toBe('SUCCEEDED');
    // One batch: the reference plan's three analytics and the two added steps, all after value_positions.
    const batch = ['allocation', 'risk', 'performance', 'pure_a', 'pure_b'];
    const ends = new Set(await Promise.all(batch.map(async (step) => (await commitsOf(done.ticket, step)).succeed)));
    expect(ends.size).toBe(1);
    const reviews = await deferred.orm.em.fork().execute<{ tx: string }[]>("SELECT xmin::text AS tx FROM ticket_events WHERE ticket = ? AND type = 'STATE_TRANSITION' AND payload->>'to' = 'STEP_REVIEW'", [done.ticket]);
    expect(reviews.map((r) => r.tx)).toContain([...ends][0]);
  });

  /** Two steps of the first batch: `early` without side effects (replying `early`), `early_write` with. */
  async function firstBatch(early: Json): Promise<{ early: number; write: number }> {
    await tool('early', {}, deferred);
    await tool('early_write', { side_effect: true }, deferred);
    tools.script('early', early);
    tools.script('early_write', { body: { written: true } });
    await assembly([{ id: 'early', tool_name: 'tool.early', dependencies: [] }, { id: 'early_write', tool_name: 'tool.early_write', dependencies: [] }], { max_active_steps: 8 }, deferred);
    return { early: tools.calls('early').length, write: tools.calls('early_write').length };
  }

  /** A connection that holds the plans table: a plan's move waits, at its statement's start, until `release`. */
  async function holdPlans(): Promise<{ release(): Promise<unknown>; end(): Promise<void> }> {
    const lock = new pg.Client({ connectionString: deferred.orm.config.get('clientUrl')! });
    await lock.connect();
    await lock.query('BEGIN');
    await lock.query('LOCK TABLE frozen_plans IN EXCLUSIVE MODE');
    return { release: () => lock.query('COMMIT'), end: () => lock.end() };
  }

  it("runs the first batch while the plan's move goes out, and commits nothing of it before that move", async () => {
    const calls = await firstBatch({ body: { early: true } });
    const plans = await holdPlans();
    try {
      const ticket = await submit(deferred);
      // The step without side effects runs meanwhile; the side effect waits to commit its start after the plan.
      await expect.poll(() => tools.calls('early').length, { timeout: 10_000 }).toBe(calls.early + 1);
      const [row] = await deferred.orm.em.fork().execute<{ lifecycle_state: string; steps: string }[]>('SELECT lifecycle_state, (SELECT count(*) FROM ticket_steps s WHERE s.ticket = t.ticket)::text AS steps FROM tickets t WHERE ticket = ?', [ticket]);
      expect(row).toEqual({ lifecycle_state: 'CONTEXT_BUILD', steps: '0' });
      expect(tools.calls('early_write').length).toBe(calls.write);
      await plans.release();
      const done = await pollUntilDone(deferred.http, ticket);
      expect(done.status).toBe('SUCCEEDED');
      expect(tools.calls('early_write').length).toBe(calls.write + 1);
      // In the log, the plan's move comes first, then the steps.
      const events = await deferred.orm.em.fork().execute<{ type: string; to: string | null }[]>("SELECT type, payload->>'to' AS to FROM ticket_events WHERE ticket = ? ORDER BY seq", [ticket]);
      const prepared = events.findIndex((e) => e.type === 'STATE_TRANSITION' && e.to === 'STEP_EXECUTION');
      expect(prepared).toBeGreaterThan(0);
      expect(events.findIndex((e) => e.type === 'step_transition')).toBeGreaterThan(prepared);
    } finally {
      await plans.end();
    }
  });

  it("cancels a ticket whose first batch runs while the plan's move goes out: the side effect never starts, the plan is not written", async () => {
    const calls = await firstBatch({ hold: true, body: { early: true } });
    const plans = await holdPlans();
    try {
      const ticket = await submit(deferred);
      await expect.poll(() => tools.held('early'), { timeout: 10_000 }).toBe(1);
      // The plan's move still waits for the lock: the cancel goes first.
      const cancelled = await deferred.http(`/v1/tickets/${ticket}:cancel`, { method: 'POST', json: {} });
      expect(cancelled.status).toBe(200);
      await plans.release();
      tools.release('early');
      expect((await pollUntilDone(deferred.http, ticket)).status).toBe('CANCELED');
      await new Promise((r) => setTimeout(r, 300));
      expect(tools.calls('early_write').length).toBe(calls.write);
      // The plan's move, refused, wrote none of its records: no plan, no step rows.
      const [left] = await deferred.orm.em.fork().execute<{ plans: string; steps: string }[]>('SELECT (SELECT count(*) FROM frozen_plans WHERE ticket = ?)::text AS plans, (SELECT count(*) FROM ticket_steps WHERE ticket = ?)::text AS steps', [ticket, ticket]);
      expect(left).toEqual({ plans: '0', steps: '0' });
    } finally {
      await plans.end();
      tools.script('early', { body: { early: true } });
    }
  });

  it('records nothing of steps that a cancel skipped while they ran, before their start was committed', async () => {
    await tool('hold', {}, deferred);
    tools.script('hold', { hold: true, body: { held: true } });
    await assembly([{ id: 'hold_a', tool_name: 'tool.hold' }, { id: 'hold_b', tool_name: 'tool.hold' }], { max_active_steps: 8 }, deferred);
    const ticket = await submit(deferred);
    await expect.poll(() => tools.held('hold'), { timeout: 5000 }).toBe(2);
    const cancelled = await deferred.http(`/v1/tickets/${ticket}:cancel`, { method: 'POST', json: {} });
    expect(cancelled.status, await cancelled.clone().text()).toBe(200);
    tools.release('hold');
    expect((await pollUntilDone(deferred.http, ticket)).status).toBe('CANCELED');
    // The released steps end, find themselves skipped, and write nothing: no start, no end.
    await new Promise((r) => setTimeout(r, 300));
    expect(Object.keys(await commitsOf(ticket, 'hold_a'))).toEqual(['skip']);
    expect(Object.keys(await commitsOf(ticket, 'hold_b'))).toEqual(['skip']);
    tools.script('hold', { body: { held: true } });
  });
});

describe('self-healing', () => {
  it('replans LOCAL: the failed step and its dependants run again, nothing else', async () => {
    await tool('flaky');
    await tool('stable');
    tools.script('flaky', toolError('STALE_QUOTE', 'REPLAN'), { body: { quote: 1 } });
    await assembly([{ id: 'enrich', tool_name: 'tool.flaky' }, { id: 'enrich_next', tool_name: 'tool.stable', dependencies: ['enrich'] }]);
    const before = tools.calls('stable').length;
    const done = await run();
    expect(done.status).toBe('SUCCEEDED');
    expect(tools.calls('flaky')).toHaveLength(2);
    expect(tools.calls('stable').length - before).toBe(1);
    const events = await trace(done.ticket);
    expect(starts(events, 'load_portfolio')).toBe(1);
    expect(starts(events, 'enrich')).toBe(2);
    const replaced = events.find((e) => e.type === 'PLAN_REPLACED')!;
    expect(replaced.payload).toMatchObject({ scope: 'LOCAL', reset_steps: expect.arrayContaining(['enrich', 'enrich_next']) });
    expect(replaced.payload.reset_steps).not.toContain('load_portfolio');
    const plans = await plansOf(done.ticket);
    expect(plans).toHaveLength(2);
    expect(plans[1]).toMatchObject({ replaces_plan_id: plans[0]!.plan_id, metadata: { replan: { scope: 'LOCAL', failed_step_id: 'enrich' } } });
    expect(lifecycle(events)).toEqual(expect.arrayContaining(['STEP_REVIEW', 'REPLAN', 'PLAN_CHECK', 'EXECUTION_PREPARE', 'GLOBAL_REVIEW', 'PACKAGING', 'COMPLETED']));
    const policy = events.filter((e) => e.type === 'POLICY_EVALUATION' && e.payload.action !== 'CONTINUE').map((e) => e.payload);
    expect(policy[0]).toMatchObject({ action: 'REPLAN', scope: 'LOCAL', next_state: 'REPLAN' });
    expect(events.find((e) => e.type === 'ERROR_OCCURRED')!.payload).toMatchObject({ code: 'STALE_QUOTE', severity: 'WARNING', retryable: false, suggested_action: 'REPLAN' });
  });

  it('replans GLOBAL through the decision plane: everything runs again except a side effect already done', async () => {
    await tool('audit', { side_effect: true });
    await tool('drift');
    tools.script('drift', toolError('SCHEMA_DRIFT', 'REPLAN', { metadata: { replan_scope: 'GLOBAL' } }), { body: { fine: true } });
    await assembly([{ id: 'audit', tool_name: 'tool.audit', dependencies: ['load_portfolio'] }, { id: 'drift', tool_name: 'tool.drift', dependencies: ['audit', 'value_positions'] }]);
    const auditBefore = tools.calls('audit').length;
    const done = await run();
    expect(done.status).toBe('SUCCEEDED');
    expect(tools.calls('audit').length - auditBefore).toBe(1);
    const events = await trace(done.ticket);
    expect(starts(events, 'load_portfolio')).toBe(2);
    expect(starts(events, 'audit')).toBe(1);
    expect(events.find((e) => e.type === 'PLAN_REPLACED')!.payload).toMatchObject({ scope: 'GLOBAL' });
    expect(events.find((e) => e.type === 'step_kept')!.payload).toMatchObject({ step_id: 'audit', capability: 'tool.audit' });
    const plans = await plansOf(done.ticket);
    expect(plans[1]).toMatchObject({ replaces_plan_id: plans[0]!.plan_id, metadata: { replan: { scope: 'GLOBAL' } } });
  });

  it('rolls back to the prepared plan around a side-effect step, which is kept and never re-run', async () => {
    await tool('notify', { side_effect: true });
    await tool('verify');
    tools.script('verify', toolError('INCONSISTENT', 'ROLLBACK', { metadata: { rollback_scope: 'GLOBAL' } }), { body: { verified: true } });
    await assembly([{ id: 'notify', tool_name: 'tool.notify' }, { id: 'verify', tool_name: 'tool.verify', dependencies: ['notify'] }]);
    const done = await run();
    expect(done.status).toBe('SUCCEEDED');
    expect(tools.calls('notify')).toHaveLength(1);
    expect(tools.calls('verify')).toHaveLength(2);
    const events = await trace(done.ticket);
    const restored = events.find((e) => e.type === 'SNAPSHOT_RESTORED')!.payload;
    expect(restored).toMatchObject({ scope: 'GLOBAL', kept_steps: ['notify'] });
    expect(restored.reset_steps).toEqual(expect.arrayContaining(['load_portfolio', 'value_positions', 'verify']));
    expect(starts(events, 'load_portfolio')).toBe(2);
    expect(starts(events, 'notify')).toBe(1);
    // The snapshot it restored is the one taken when the plan was prepared.
    const created = events.filter((e) => e.type === 'SNAPSHOT_CREATED').map((e) => e.payload);
    expect(created.find((c) => c.snapshot_id === restored.snapshot_id)).toMatchObject({ lifecycle_state: 'EXECUTION_PREPARE' });
    const ctx = await context(done.ticket);
    expect(ctx.snapshots.length).toBeGreaterThanOrEqual(created.length);
  });

  it('rolls back LOCAL to the last reviewed batch: earlier batches stay done', async () => {
    await tool('stamp', { side_effect: true });
    await tool('audit_local');
    tools.script('audit_local', toolError('MISMATCH', 'ROLLBACK'), { body: { audited: true } });
    await assembly([{ id: 'stamp', tool_name: 'tool.stamp' }, { id: 'audit_local', tool_name: 'tool.audit_local', dependencies: ['stamp', 'allocation'] }]);
    const done = await run();
    expect(done.status).toBe('SUCCEEDED');
    const events = await trace(done.ticket);
    const restored = events.find((e) => e.type === 'SNAPSHOT_RESTORED')!.payload;
    expect(restored).toMatchObject({ scope: 'LOCAL', label: expect.stringMatching(/^batch:/), reset_steps: expect.arrayContaining(['audit_local']), kept_steps: [] });
    expect(restored.reset_steps).not.toContain('load_portfolio');
    expect([starts(events, 'load_portfolio'), starts(events, 'stamp'), starts(events, 'audit_local')]).toEqual([1, 1, 2]);
    expect(tools.calls('stamp')).toHaveLength(1);
  });

  it('refuses at PLAN_CHECK a step whose input breaks its tool schema, and replans onto the fallback', async () => {
    await tool('strict_quote', { input_schema: { type: 'object', required: ['symbol'], properties: { symbol: { type: 'string' } } } });
    await tool('loose_quote');
    await assembly([{ id: 'quote', tool_name: 'tool.strict_quote', fallback_tool: 'tool.loose_quote', input: {} }]);
    const done = await run();
    expect(done.status).toBe('SUCCEEDED');
    expect(tools.calls('strict_quote')).toHaveLength(0);
    const events = await trace(done.ticket);
    const critic = events.filter((e) => e.type === 'AGENT_DECISION' && e.payload.role === 'PLAN_CRITIC').map((e) => e.payload.success);
    expect(critic).toEqual([false, true]);
    expect(lifecycle(events).slice(0, 6)).toEqual(['CONTEXT_BUILD', 'PLAN_GENERATION', 'PLAN_CHECK', 'REPLAN', 'PLAN_CHECK', 'EXECUTION_PREPARE']);
    const plans = await plansOf(done.ticket);
    expect(plans[1]!.steps.find((x: Json) => x.id === 'quote')).toMatchObject({ tool_name: 'tool.loose_quote', avoided: 'tool.strict_quote' });
    expect(events.find((e) => e.type === 'ERROR_OCCURRED')!.payload).toMatchObject({ code: 'PLAN_CHECK_FAILED', suggested_action: 'REPLAN', metadata: { avoid: ['tool.strict_quote'] } });
  });

  it('halts after N consecutive failures, retrying what is retryable until then', async () => {
    await tool('broken');
    tools.script('broken', { status: 503, body: { error: { code: 'UPSTREAM_DOWN', message: 'down', retryable: true } } });
    await assembly([{ id: 'fetch', tool_name: 'tool.broken' }], { max_consecutive_failures: 3, max_step_retries: 10 });
    const done = await run();
    expect(done.status).toBe('FAILED');
    expect(tools.calls('broken')).toHaveLength(3);
    expect(done.error).toMatchObject({ code: 'UPSTREAM_DOWN', retryable: true, details: { halt_reason: '3 consecutive failures reached the limit of 3' } });
    const policy = (await trace(done.ticket, 'POLICY_EVALUATION')).map((e) => e.payload.action).filter((a) => a !== 'CONTINUE');
    expect(policy).toEqual(['RETRY', 'RETRY', 'HALT']);
  });

  it('denies a tool the STEP_EXECUTOR role may not call, before it runs', async () => {
    await tool('payout', { permission_level: 'ADMIN' });
    await assembly([{ id: 'payout', tool_name: 'tool.payout' }], { role_permissions: { STEP_EXECUTOR: ['PUBLIC', 'INTERNAL'] } });
    const done = await run();
    expect(done.status).toBe('FAILED');
    expect(done.error).toMatchObject({ code: 'TOOL_PERMISSION_DENIED', category: 'COMPLIANCE', retryable: false });
    expect(tools.calls('payout')).toHaveLength(0);
    const policy = (await trace(done.ticket, 'POLICY_EVALUATION')).map((e) => e.payload).filter((p) => !p.allow);
    expect(policy[0]).toMatchObject({ allow: false, blocked_tools: ['tool.payout'], role: 'STEP_EXECUTOR', step_id: 'payout' });
  });
});

describe('WAIT_HUMAN', () => {
  it('holds a critical step for a human, visibly, and continues when the human approves', async () => {
    await tool('wire', { permission_level: 'ADMIN', side_effect: true });
    await assembly([{ id: 'wire', tool_name: 'tool.wire' }]);
    const ticket = await submit();
    await expect.poll(async () => (await s.http(`/v1/tickets/${ticket}`)).headers.get('x-abc-lifecycle-state'), { timeout: 5000 }).toBe('WAIT_HUMAN');
    const poll = await (await s.http(`/v1/tickets/${ticket}`)).json();
    expect(poll).toMatchObject({ status: 'RUNNING', progress: { phase: 'execute' } });
    expect(poll.progress.steps.find((x: Json) => x.step_id === 'wire')).toMatchObject({ status: 'PENDING', message: expect.stringMatching(/waiting for human approval: tool.wire is CRITICAL risk/) });
    const ctx = await context(ticket);
    expect(ctx.human_request).toMatchObject({ kind: 'step_approval', step_id: 'wire' });
    expect(tools.calls('wire')).toHaveLength(0);
    // The observer shows the wait as a suspended execution contract.
    const timeline = await (await s.http('/api/execution/session-0001/timeline')).json();
    expect(timeline.contracts.find((c: Json) => c.execution_id === ctx.human_request.execution_id)).toMatchObject({ action_type: 'human_input', current_status: 'waiting' });

    const answer = await s.http(`/v1/tickets/${ticket}:feedback`, { method: 'POST', json: { action: 'continue', feedback: 'approved by treasury' } });
    expect(await answer.json()).toEqual({ ticket, status: 'RUNNING', lifecycle_state: 'STEP_EXECUTION' });
    expect((await pollUntilDone(s.http, ticket)).status).toBe('SUCCEEDED');
    expect(tools.calls('wire')).toHaveLength(1);
    const human = (await trace(ticket, 'HUMAN_INTERACTION')).map((e) => e.payload.direction);
    expect(human).toEqual(['requested', 'answered']);
    const again = await s.http(`/v1/tickets/${ticket}:feedback`, { method: 'POST', json: { action: 'continue' } });
    expect(again.status).toBe(412);
    expect((await again.json()).error).toMatchObject({ code: 'NOT_WAITING_FOR_HUMAN' });
  });

  it('fails with HUMAN_TIMEOUT when nobody answers in time', async () => {
    await assembly([{ id: 'wire', tool_name: 'tool.wire' }], { human_timeout_ms: 300 });
    const calls = tools.calls('wire').length;
    const done = await run();
    expect(done.status).toBe('FAILED');
    expect(done.error).toMatchObject({ code: 'HUMAN_TIMEOUT', category: 'TIMEOUT', retryable: false });
    expect(tools.calls('wire')).toHaveLength(calls);
    const events = await trace(done.ticket);
    expect(lifecycle(events).slice(-2)).toEqual(['WAIT_HUMAN', 'FAILED']);
    expect(events.filter((e) => e.type === 'HUMAN_INTERACTION').map((e) => e.payload.direction)).toEqual(['requested', 'timed_out']);
  });

  it('rejects: the execution fails with HUMAN_REJECTED; bad feedback is refused at its field', async () => {
    await assembly([{ id: 'wire', tool_name: 'tool.wire' }]);
    const ticket = await submit();
    await expect.poll(async () => (await s.http(`/v1/tickets/${ticket}`)).headers.get('x-abc-lifecycle-state'), { timeout: 5000 }).toBe('WAIT_HUMAN');
    const bad = await s.http(`/v1/tickets/${ticket}:feedback`, { method: 'POST', json: { action: 'maybe' } });
    expect(bad.status).toBe(400);
    const res = await s.http(`/v1/tickets/${ticket}:feedback`, { method: 'POST', json: { action: 'reject', feedback: 'not today' } });
    expect((await res.json()).lifecycle_state).toBe('FAILED');
    const done = await pollUntilDone(s.http, ticket);
    expect(done.error).toMatchObject({ code: 'HUMAN_REJECTED', message: expect.stringContaining('not today') });
    expect(done.progress.steps.find((x: Json) => x.step_id === 'wire').status).toBe('SKIPPED');
  });
  it('cancelling a waiting execution withdraws its human request', async () => {
    await assembly([{ id: 'wire', tool_name: 'tool.wire' }]);
    const ticket = await submit();
    await expect.poll(async () => (await s.http(`/v1/tickets/${ticket}`)).headers.get('x-abc-lifecycle-state'), { timeout: 5000 }).toBe('WAIT_HUMAN');
    const { human_request } = await context(ticket);
    expect(await (await s.http(`/v1/tickets/${ticket}:cancel`, { method: 'POST', json: {} })).json()).toEqual({ ticket, status: 'CANCELED' });
    const snapshot = await (await s.http(`/api/execution/${human_request.execution_id}/snapshot`)).json();
    expect(snapshot).toMatchObject({ current_status: 'cancelled', last_trigger: 'cancel' });
    expect((await trace(ticket, 'HUMAN_INTERACTION')).map((e) => e.payload.direction)).toEqual(['requested', 'withdrawn']);
    const late = await s.http(`/v1/tickets/${ticket}:feedback`, { method: 'POST', json: { action: 'continue' } });
    expect((await late.json()).error.code).toBe('NOT_WAITING_FOR_HUMAN');
  });
});

describe('memory', () => {
  it('finds an earlier success by full-text search, and records failure patterns', async () => {
    const found = await (await s.http('/v1/memory/search?scope=GLOBAL&q=success%20analyze_portfolio')).json();
    expect(found.entries.length).toBeGreaterThan(0);
    expect(found.entries[0]).toMatchObject({ scope: 'GLOBAL', tags: expect.arrayContaining(['success']), value: { type: 'success', intent: 'analyze_portfolio' } });
    const patterns = await (await s.http('/v1/memory/search?scope=GLOBAL&q=STALE_QUOTE')).json();
    expect(patterns.entries[0]).toMatchObject({ key: 'failure:analyze_portfolio:tool.flaky:STALE_QUOTE', value: { type: 'failure_pattern', capability: 'tool.flaky', count: 1 } });
    const bad = await s.http('/v1/memory/search?scope=SESSION&q=x');
    expect(bad.status).toBe(400);
  });

  it('keeps the newest success cases of an intent, and drops the older ones as a new one is stored', async () => {
    await assembly([]);
    const em = s.orm.em.fork();
    const [first] = await em.execute<{ tenant_id: string }[]>('SELECT tenant_id FROM tickets WHERE ticket = ?', [(await run()).ticket]);
    const tenant = first!.tenant_id;
    // Thirty older cases of this intent; as many of another intent and of another tenant, which are not this intent's.
    await em.execute(
      `INSERT INTO memory (memory_id, tenant_id, scope, scope_id, key, value, tags, created_at)
       SELECT 'mem_old_' || x.n || '_' || g, x.tenant, 'GLOBAL', 'global', 'success:' || x.intent || ':tkt_old_' || g, '{"type": "success"}', '["success"]', now() - g * interval '1 minute'
       FROM generate_series(1, 30) g, (VALUES (1, ?, 'analyze_portfolio'), (2, ?, 'other_intent'), (3, 'tenant_other', 'analyze_portfolio')) AS x(n, tenant, intent)`,
      [tenant, tenant],
    );
    const cases = async (t: string, intent: string) =>
      (await em.execute<{ key: string }[]>("SELECT key FROM memory WHERE tenant_id = ? AND scope = 'GLOBAL' AND starts_with(key, ?) ORDER BY created_at DESC", [t, `success:${intent}:`])).map((r) => r.key);
    const newest = (await cases(tenant, 'analyze_portfolio')).slice(0, SUCCESS_CASES_KEPT - 1);
    const done = await run();
    expect(done.status).toBe('SUCCEEDED');
    expect(await cases(tenant, 'analyze_portfolio')).toEqual([`success:analyze_portfolio:${done.ticket}`, ...newest]);
    expect(await cases(tenant, 'other_intent')).toHaveLength(30);
    expect(await cases('tenant_other', 'analyze_portfolio')).toHaveLength(30);
  });

  it('the planner avoids a capability with recorded failures when it has a fallback', async () => {
    await tool('quote_a');
    await tool('quote_b');
    tools.script('quote_a', { status: 500, body: { error: { code: 'QUOTE_DOWN', message: 'down' } } });
    await assembly([{ id: 'quote', tool_name: 'tool.quote_a', fallback_tool: 'tool.quote_b' }], { avoid_after_failures: 1 });
    const first = await run();
    expect(first.status).toBe('SUCCEEDED');
    expect(tools.calls('quote_a')).toHaveLength(1);
    const second = await run();
    expect(second.status).toBe('SUCCEEDED');
    // Memory said quote_a fails: the second plan never tried it.
    expect(tools.calls('quote_a')).toHaveLength(1);
    const [plan] = await plansOf(second.ticket);
    expect(plan!.steps.find((x: Json) => x.id === 'quote')).toMatchObject({ tool_name: 'tool.quote_b', avoided: 'tool.quote_a' });
    const ctx = await context(second.ticket);
    expect(ctx.execution_context.avoid).toContain('tool.quote_a');

    // A day without that failure: quote_a gets its chance again.
    await s.orm.em.fork().execute("UPDATE memory SET created_at = now() - interval '25 hours' WHERE key LIKE 'failure:analyze_portfolio:tool.quote_a:%'");
    expect((await run()).status).toBe('SUCCEEDED');
    expect(tools.calls('quote_a')).toHaveLength(2);
  });
});
