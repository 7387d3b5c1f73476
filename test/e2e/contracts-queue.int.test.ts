// Contract executions held in the queue (no worker in the serving core): sync
// timeouts, the read-only poll, cancel, a long poll woken by progress, an async
// ticket's admission, and the sweep that queues a ticket whose claim lapsed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCore } from '../../src/main/core.js';
import { readOnlyPool } from '../../src/store/read-only.js';
import { ContractQueue } from '../../src/store/ticket-queue.js';
import { FAST_RETRY, coreOptions } from '../support/core.js';
import { contract, importSamplePortfolios, registry, request } from '../support/contracts.js';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { tableDigest } from '../support/digest.js';
import { testLogger } from '../support/log.js';

let s: TestStack;

beforeAll(async () => {
  s = await startTestStack({ contracts: { workers: 0 } });
  await importSamplePortfolios(s.orm);
});
afterAll(async () => s?.close());

const submit = (body: unknown) => s.http('/v1/contracts:submit', { method: 'POST', json: body });
const valid = (kind: 'submit-response' | 'poll-response' | 'error', doc: unknown) => expect(registry.validateResponse(contract, kind, doc)).toEqual({ ok: true });

/** The claim on a ticket: its admission's until its job is added, a worker's, or none. */
const claim = async (ticket: string) => (await s.orm.em.fork().execute<{ lease_owner: string | null }[]>('SELECT lease_owner FROM tickets WHERE ticket = ?', [ticket]))[0]!.lease_owner;

/** An async ticket, once its admission has added its job. */
async function queued(patch: Record<string, unknown> = {}): Promise<string> {
  const res = await submit(request(patch));
  expect(res.status).toBe(202);
  const ticket = (await res.json()).task.ticket;
  await expect.poll(() => claim(ticket)).toBeNull();
  return ticket;
}

/** Everything a poll could possibly write. */
const stateDigest = () => tableDigest(s.orm, ['tickets', 'ticket_steps', 'ticket_events', 'frozen_plans', 'graphile_worker._private_jobs']);

describe('sync and auto without a worker', () => {
  it('answers sync with a TIMEOUT error carrying the ticket, and the ticket is kept', async () => {
    const res = await submit(request({ execution_preferences: { mode: 'sync', max_latency_ms: 150 } }));
    const body = await res.json();
    expect(res.status).toBe(504);
    valid('error', body.error);
    expect(body.error).toMatchObject({ code: 'SYNC_TIMEOUT', category: 'TIMEOUT', retryable: true, retry_after_seconds: 1, details: { status: 'QUEUED' } });
    const ticket = body.error.details.ticket;
    expect(res.headers.get('x-abc-ticket')).toBeNull();
    const poll = await (await s.http(`/v1/tickets/${ticket}`)).json();
    valid('poll-response', poll);
    expect(poll).toMatchObject({ ticket, status: 'QUEUED', progress: { phase: 'validate' } });
  });

  it('degrades auto to a ticket when the result is not ready within max_latency_ms', async () => {
    const res = await submit(request({ execution_preferences: { mode: 'auto', max_latency_ms: 1000 } }));
    const body = await res.json();
    expect(res.status).toBe(202);
    valid('submit-response', body);
    expect(body.task.status).toBe('QUEUED');
  });
});

describe('the poll is a read-only projection', () => {
  it('writes nothing and advances nothing, however often it is called', async () => {
    const ticket = await queued({ execution_preferences: { progress_granularity: 'step' } });
    const before = await stateDigest();
    for (let i = 0; i < 20; i++) {
      const res = await s.http(`/v1/tickets/${ticket}${i % 5 === 0 ? '?wait_ms=20' : ''}`);
      const poll = await res.json();
      expect(poll).toMatchObject({ status: 'QUEUED', progress: { phase: 'validate', percent: 5 } });
    }
    expect(await stateDigest()).toBe(before);
  });

  it('reads through sessions the database keeps read-only', async () => {
    const pool = readOnlyPool(s.orm.config.get('clientUrl')!, 1);
    try {
      expect((await pool.query('SHOW transaction_read_only')).rows[0].transaction_read_only).toBe('on');
      await expect(pool.query("UPDATE tickets SET status = 'FAILED'")).rejects.toThrow(/read-only transaction/);
    } finally {
      await pool.end();
    }
  });
});

describe('cancel', () => {
  it('cancels a queued ticket, refuses a second cancel, and has no artifact', async () => {
    const ticket = await queued();
    const res = await s.http(`/v1/tickets/${ticket}:cancel`, { method: 'POST', json: { reason: 'client gave up' } });
    expect(await res.json()).toEqual({ ticket, status: 'CANCELED' });
    const poll = await (await s.http(`/v1/tickets/${ticket}`)).json();
    valid('poll-response', poll);
    expect(poll.status).toBe('CANCELED');
    expect(poll.error).toBeUndefined();
    const again = await s.http(`/v1/tickets/${ticket}:cancel`, { method: 'POST', json: {} });
    expect(again.status).toBe(409);
    expect((await again.json()).error).toMatchObject({ code: 'TICKET_FINISHED', category: 'VALIDATION', details: { status: 'CANCELED' } });
    const artifact = await s.http(`/v1/tickets/${ticket}/artifact`);
    expect(artifact.status).toBe(412);
    expect((await artifact.json()).error.code).toBe('ARTIFACT_NOT_READY');
  });

  it('wakes a long poll on the cancel', async () => {
    const ticket = await queued();
    const poll = s.http(`/v1/tickets/${ticket}?wait_ms=20000`).then((r) => r.json());
    await new Promise((r) => setTimeout(r, 100));
    await s.http(`/v1/tickets/${ticket}:cancel`, { method: 'POST', json: {} });
    expect((await poll).status).toBe('CANCELED');
  });
});

describe('retention', () => {
  it('forgets a finished ticket once its retention has passed, and frees its idempotency key', async () => {
    const t = await startTestStack({ contracts: { workers: 0, ticketRetentionMs: 300, retentionSweepMs: 100 } });
    try {
      const body = request();
      const res = await t.http('/v1/contracts:submit', { method: 'POST', json: body });
      const ticket = (await res.json()).task.ticket;
      await t.http(`/v1/tickets/${ticket}:cancel`, { method: 'POST', json: {} });
      expect((await t.http(`/v1/tickets/${ticket}`)).status).toBe(200);
      await expect.poll(async () => (await t.http(`/v1/tickets/${ticket}`)).status, { timeout: 5000 }).toBe(404);
      // The sweep deletes the row, its steps and its events.
      const left = async () => (await t.orm.em.fork().execute<{ n: number }[]>('SELECT (SELECT count(*) FROM ticket_events WHERE ticket = ?) + (SELECT count(*) FROM tickets WHERE ticket = ?) AS n', [ticket, ticket]))[0]!.n;
      await expect.poll(async () => Number(await left()), { timeout: 5000 }).toBe(0);
      // The key is free again: the same request makes a new ticket.
      const again = await (await t.http('/v1/contracts:submit', { method: 'POST', json: body })).json();
      expect(again.task.ticket).not.toBe(ticket);
    } finally {
      await t.close();
    }
  });
});

describe('long poll', () => {
  it('answers wait_ms=0 at once, even when the request asks for long polls', async () => {
    // Queued with no worker: nothing will change, so any wait would last the full 20 s.
    const ticket = await queued({ execution_preferences: { poll_long_wait_ms: 20000 } });
    const started = Date.now();
    const poll = await s.http(`/v1/tickets/${ticket}?wait_ms=0`);
    expect(poll.status).toBe(200);
    expect((await poll.json()).status).toBe('QUEUED');
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('returns as soon as a worker makes progress', async () => {
    const ticket = await queued({ execution_preferences: { poll_long_wait_ms: 20000 } });
    const started = Date.now();
    // No wait_ms: the ticket's own poll_long_wait_ms applies.
    const poll = s.http(`/v1/tickets/${ticket}`).then((r) => r.json());
    await new Promise((r) => setTimeout(r, 100));
    // Another core with a worker, on the same database, picks the job up.
    const worker = await startCore(coreOptions(s.orm, { retry: FAST_RETRY, drainTimeoutMs: 500, contracts: { workers: 1 } }));
    try {
      const seen = await poll;
      valid('poll-response', seen);
      expect(seen.status).not.toBe('QUEUED');
      expect(Date.now() - started).toBeLessThan(20000);
    } finally {
      await worker.close();
    }
  });
});

describe('admission, and the recovery sweep of lapsed claims', () => {
  const queue = () => new ContractQueue({ orm: s.orm, log: testLogger(), concurrency: 0, leaseMs: 1000, pollIntervalMs: 1000 });
  const job = async (ticket: string) =>
    (await s.orm.em.fork().execute<{ due: boolean; later: boolean; locked: boolean }[]>(
      "SELECT run_at <= now() AS due, run_at > now() + interval '30 seconds' AS later, locked_at IS NOT NULL AS locked FROM graphile_worker._private_jobs WHERE key = ?",
      [ticket],
    ))[0];
  const dropJob = (ticket: string) => s.orm.em.fork().execute('SELECT graphile_worker.remove_job(?)', [ticket]);
  /** The ticket as a core that ran it itself and died leaves it: claimed, claim lapsed, no job. */
  const lapsed = async (ticket: string, state?: string) => {
    await dropJob(ticket);
    await s.orm.em.fork().execute(
      `UPDATE tickets SET lease_owner = 'now-' || ticket, lease_expires_at = now() - interval '1 second'${state ? ', lifecycle_state = ?' : ''} WHERE ticket = ?`,
      state ? [state, ticket] : [ticket],
    );
  };
  const revision = async (ticket: string) => (await s.orm.em.fork().execute<{ revision: number }[]>('SELECT revision FROM graphile_worker._private_jobs WHERE key = ?', [ticket]))[0]?.revision;

  it('adds an admitted ticket’s job after its commit, due now, and frees its admission’s claim', async () => {
    const res = await submit(request());
    const ticket = (await res.json()).task.ticket;
    await expect.poll(() => job(ticket)).toEqual({ due: true, later: false, locked: false });
    expect(await claim(ticket)).toBeNull();
    const [created] = await s.orm.em.fork().execute<{ lifecycle_state: string }[]>('SELECT lifecycle_state FROM tickets WHERE ticket = ?', [ticket]);
    expect(created!.lifecycle_state).toBe('INIT');
  });

  it('leaves a ticket whose core died before adding its job to the sweep, which a late admission does not repeat', async () => {
    const ticket = await queued();
    // As a core that died after the ticket's commit leaves it: claimed by its admission, the claim lapsed, no job.
    await dropJob(ticket);
    await s.orm.em.fork().execute("UPDATE tickets SET lease_owner = 'admitted-' || ticket, lease_expires_at = now() - interval '1 second' WHERE ticket = ?", [ticket]);
    expect(await queue().recover()).toBeGreaterThanOrEqual(1);
    expect(await job(ticket)).toEqual({ due: true, later: false, locked: false });
    expect(await claim(ticket)).toBeNull();
    expect(await revision(ticket)).toBe(0);
    // A core that was only slow admits it after all: its claim is gone, so it adds nothing.
    const late = queue();
    await late.start(async () => {});
    late.admit(ticket);
    await late.close();
    expect(await revision(ticket)).toBe(0);
  });

  it('adds no job for an admitted ticket a cancel ended first', async () => {
    const ticket = await queued();
    await dropJob(ticket);
    await s.orm.em.fork().execute("UPDATE tickets SET lease_owner = 'admitted-' || ticket, lease_expires_at = now() + interval '1 minute' WHERE ticket = ?", [ticket]);
    expect((await s.http(`/v1/tickets/${ticket}:cancel`, { method: 'POST', json: {} })).status).toBe(200);
    const late = queue();
    await late.start(async () => {});
    late.admit(ticket);
    await late.close();
    expect(await job(ticket)).toBeUndefined();
  });

  it('queues a ticket whose claim lapsed with no job, due now, and frees the claim', async () => {
    const ticket = await queued();
    await lapsed(ticket);
    expect(await job(ticket)).toBeUndefined();
    expect(await queue().recover()).toBeGreaterThanOrEqual(1);
    expect(await job(ticket)).toEqual({ due: true, later: false, locked: false });
    expect(await claim(ticket)).toBeNull();
  });

  it("keeps the time of a job the ticket already has (a human wait's deadline)", async () => {
    const ticket = await queued();
    await lapsed(ticket, 'WAIT_HUMAN');
    await s.orm.em.fork().transactional((tx) => queue().enqueue(tx, ticket, new Date(Date.now() + 60_000)));
    await queue().recover();
    expect(await job(ticket)).toEqual({ due: false, later: true, locked: false });
    expect(await claim(ticket)).toBeNull();
  });

  it('leaves alone a ticket whose claim is still held', async () => {
    const ticket = await queued();
    await dropJob(ticket);
    await s.orm.em.fork().execute("UPDATE tickets SET lease_owner = 'now-' || ticket, lease_expires_at = now() + interval '1 minute' WHERE ticket = ?", [ticket]);
    await queue().recover();
    expect(await job(ticket)).toBeUndefined();
    expect(await claim(ticket)).toBe(`now-${ticket}`);
  });
});
