// A real core on a random port, over a fresh migrated database.
import { closeCore, connectCore, type CoreClients } from '../../gateway/core-client.js';
import { ApiKeys } from '../../src/access/api-keys.js';
import { startCore, type Core, type CoreOptions } from '../../src/main/core.js';
import { coreSettings, defaultConfig } from '../../src/config.js';
import { SecretBox } from '../../src/access/secret-box.js';
import { loadPacks } from '../../src/main/packs.js';
import { DEFAULT_TOOL_KINDS } from '../../src/execution/tool-kinds.js';
import path from 'node:path';
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

/** The packs shipped in this repository. */
export const PACKS = await loadPacks(path.resolve('packs'));

/** Settings a test overrides; `llm` and `contracts` merge into the defaults. */
export type CoreOverrides = Partial<Omit<CoreOptions, 'llm' | 'contracts'>> & { llm?: Partial<CoreOptions['llm']>; contracts?: Partial<CoreOptions['contracts']> };

/** A core's options: the configuration's defaults, a random port, this repository's packs, then `overrides`. */
export function coreOptions(orm: Orm, overrides: CoreOverrides = {}): CoreOptions {
  const base = coreSettings(defaultConfig());
  const { llm, contracts, ...rest } = overrides;
  return { ...base, orm, log: testLogger(), secrets: SecretBox.ephemeral(), packs: PACKS, toolKinds: DEFAULT_TOOL_KINDS, host: '127.0.0.1', port: 0, ...rest, llm: { ...base.llm, ...llm }, contracts: { ...base.contracts, ...contracts } };
}

export async function startTestCore(overrides: CoreOverrides = {}): Promise<TestCore> {
  const store = await migratedOrm();
  const { key } = await new ApiKeys(store.orm).create('test');
  const core = await startCore(coreOptions(store.orm, {
    publicBaseUrl: 'http://abc.test',
    retry: FAST_RETRY,
    agentIdleTimeoutMs: 2000,
    drainTimeoutMs: 1000,
    // Contract workers only where a test asks for them.
    ...overrides,
    contracts: { workers: 0, ...overrides.contracts },
  }));
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
