// The stored policies' reads on their notification: one at a time, one more
// for any number of wakes during a read, and close() waits for the read in
// flight. A read that reached for the pool as the ORM closed held the pool
// open for good (Kysely does not release a connection acquired during its
// destroy), so a core's shutdown hung.
import pg from 'pg';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { PolicyStore } from '../../src/orchestrator/policy-store.js';
import { EventBus, POLICY_CHANNEL } from '../../src/store/event-bus.js';
import { migratedOrm } from '../support/db.js';
import { testLogger } from '../support/log.js';

let store: Awaited<ReturnType<typeof migratedOrm>>;
let bus: EventBus;
let holder: pg.Client;

beforeAll(async () => {
  store = await migratedOrm();
  bus = await EventBus.start(store.db.url, testLogger());
});
afterEach(async () => {
  await holder?.end().catch(() => undefined);
});
afterAll(async () => {
  await bus.close();
  await store.close();
});

const em = () => store.orm.em.fork();
const notify = (tenant: string) => em().execute('SELECT pg_notify(?, ?)', [POLICY_CHANNEL, tenant]);
/** This database's backends that wait for a lock. */
const waitingForLock = async () =>
  (await em().execute<{ n: number }[]>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"))[0]!.n;

/** A store whose reads are counted; the table locked by another transaction, which stores `tenant`'s policy of `version`. */
async function lockedStore(tenant: string, version: number) {
  const counter = { reads: 0 };
  const policies = await PolicyStore.open(undefined, testLogger(), { em: () => (counter.reads++, em()), bus });
  counter.reads = 0;
  holder = new pg.Client({ connectionString: store.db.url });
  await holder.connect();
  await holder.query('BEGIN');
  await holder.query('LOCK TABLE policies IN ACCESS EXCLUSIVE MODE');
  await holder.query("INSERT INTO policies (policy_id, tenant_id, version, document, active) VALUES ($1, $2, $3, $4::jsonb, true)", [
    `pol_${tenant}`, tenant, version, JSON.stringify({ version, default: 'allow', rules: [] }),
  ]);
  return { policies, counter };
}

it('reads once more after the read in flight, for any number of wakes meanwhile', async () => {
  const { policies, counter } = await lockedStore('reload_t1', 3);
  let wakes = 0;
  const off = bus.onWake('policy', () => wakes++);
  try {
    await notify('reload_t1');
    await expect.poll(waitingForLock).toBe(1);
    for (let i = 0; i < 3; i++) await notify('reload_t1');
    // The store's listener came first, so it has had every wake the test has.
    await expect.poll(() => wakes).toBe(4);
    expect(counter.reads).toBe(1);
    expect(await waitingForLock()).toBe(1);

    await holder.query('COMMIT');
    await expect.poll(() => counter.reads).toBe(2);
    await policies.close();
    expect(counter.reads).toBe(2);
    expect(policies.forTenant('reload_t1').tenant).toMatchObject({ version: 3 });
  } finally {
    off();
  }
});

it('closes only once the read in flight has ended, and reads no more', async () => {
  const { policies, counter } = await lockedStore('reload_t2', 4);
  await notify('reload_t2');
  await expect.poll(waitingForLock).toBe(1);

  let closed = false;
  const closing = policies.close().then(() => (closed = true));
  await new Promise((resolve) => setImmediate(resolve));
  expect(closed).toBe(false);

  await holder.query('COMMIT');
  await closing;
  // The read it waited for saw the committed policy.
  expect(policies.forTenant('reload_t2').tenant).toMatchObject({ version: 4 });
  let wakes = 0;
  const off = bus.onWake('policy', () => wakes++);
  await notify('reload_t2');
  await expect.poll(() => wakes).toBe(1);
  off();
  expect(counter.reads).toBe(1);
});
