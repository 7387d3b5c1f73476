// A real core on a random port, over a fresh migrated database.
import { closeCore, connectCore, type CoreClients } from '../../gateway/core-client.js';
import { ApiKeys } from '../../src/access/api-keys.js';
import { startCore, type Core, type CoreOptions } from '../../src/main/core.js';
import type { Orm } from '../../src/store/orm.js';
import { migratedOrm } from './db.js';
import { testLogger } from './log.js';

export interface TestCore {
  core: Core;
  clients: CoreClients;
  orm: Orm;
  key: string;
  close(): Promise<void>;
}

export const FAST_RETRY = { maxRetries: 2, initialDelayMs: 20, maxDelayMs: 100, multiplier: 2, jitter: 0.1 };

export async function startTestCore(overrides: Partial<CoreOptions> = {}): Promise<TestCore> {
  const store = await migratedOrm();
  const { key } = await new ApiKeys(store.orm).create('test');
  const core = await startCore({
    orm: store.orm,
    log: testLogger(),
    host: '127.0.0.1',
    port: 0,
    publicBaseUrl: 'http://abc.test',
    retry: FAST_RETRY,
    agentIdleTimeoutMs: 2000,
    drainTimeoutMs: 1000,
    // Contract workers only where a test asks for them.
    contracts: { workers: 0 },
    ...overrides,
  });
  const clients = connectCore(core.address);
  return {
    core,
    clients,
    orm: store.orm,
    key,
    close: async () => {
      closeCore(clients);
      await core.close();
      await store.close();
    },
  };
}
