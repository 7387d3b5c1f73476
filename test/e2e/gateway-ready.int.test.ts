// /health is liveness; /ready is 200 only when the core is reachable and its schema is current.
import { coreOptions } from '../support/core.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildGateway } from '../../gateway/app.js';
import { closeCore, connectCore } from '../../gateway/core-client.js';
import { startCore, type Core } from '../../src/main/core.js';
import { createOrm, migrate, type Orm } from '../../src/store/orm.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { testLogger } from '../support/log.js';

describe('gateway readiness', () => {
  it('is live but not ready when the core is unreachable', async () => {
    const core = connectCore('127.0.0.1:1');
    const app = buildGateway({ core, logger: testLogger(), readyTimeoutMs: 300 });
    try {
      expect((await app.inject('/health')).json()).toEqual({ status: 'ok' });
      const ready = await app.inject('/ready');
      expect(ready.statusCode).toBe(503);
      expect(ready.json()).toEqual({ status: 'not_ready', reason: 'core is unreachable' });
    } finally {
      await app.close();
      closeCore(core);
    }
  });

  describe('with a real core', () => {
    let db: TestDatabase;
    let orm: Orm;
    let core: Core;

    beforeAll(async () => {
      db = await createTestDatabase();
      orm = await createOrm({ url: db.url, poolMax: 2 });
      core = await startCore(coreOptions(orm, { migrationPollMs: 50 }));
    });
    afterAll(async () => {
      await core.close();
      await orm.close();
      await db.drop();
    });

    it('is not ready before migrations and ready after, over a real socket', async () => {
      const clients = connectCore(core.address);
      const app = buildGateway({ core: clients, logger: testLogger() });
      const url = await app.listen({ host: '127.0.0.1', port: 0 });
      try {
        const before = await fetch(`${url}/ready`);
        expect(before.status).toBe(503);
        expect(await before.json()).toMatchObject({ status: 'not_ready', reason: expect.stringContaining('migrations pending') });
        await migrate(orm);
        await expect.poll(async () => (await fetch(`${url}/ready`)).status, { timeout: 5000, interval: 50 }).toBe(200);
      } finally {
        await app.close();
        closeCore(clients);
      }
    });
  });
});
