import { coreOptions } from '../support/core.js';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Error as ErrorMessage } from '../../gen/abc/common/v1/error.js';
import { GetRunMetricsRequest } from '../../gen/abc/observer/v1/observer.js';
import { HealthCheckResponse_ServingStatus } from '../../gen/grpc/health/v1/health.js';
import { closeCore, connectCore, type CoreClients } from '../../gateway/core-client.js';
import { ApiKeys } from '../../src/access/api-keys.js';
import { startCore, type Core } from '../../src/main/core.js';
import { createOrm, migrate, type Orm } from '../../src/store/orm.js';
import { createTestDatabase, migratedOrm, type TestDatabase } from '../support/db.js';
import { failure, unary, withKey } from '../support/grpc.js';

describe('core gRPC server', () => {
  let store: Awaited<ReturnType<typeof migratedOrm>>;
  let core: Core;
  let clients: CoreClients;
  let key: string;

  beforeAll(async () => {
    store = await migratedOrm();
    key = (await new ApiKeys(store.orm).create('test')).key;
    core = await startCore(coreOptions(store.orm));
    clients = connectCore(core.address);
  });
  afterAll(async () => {
    closeCore(clients);
    await core.close();
    await store.close();
  });

  it('answers the standard health check, with no API key, through a gen/ client', async () => {
    const res = await unary(clients.health.check.bind(clients.health), { service: '' });
    expect(res.status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    const perService = await unary(clients.health.check.bind(clients.health), { service: 'abc.orchestrator.v1.RunService' });
    expect(perService.status).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });

  it('refuses a call without an API key, with the seed error payload', async () => {
    const error = await failure(unary(clients.agents.listAgents.bind(clients.agents), {}));
    expect(error.code).toBe(status.UNAUTHENTICATED);
    const payload = ErrorMessage.decode(error.metadata.get('abc-error-bin')[0] as Buffer);
    expect(payload).toMatchObject({ code: 'unauthenticated', category: 'ERROR_CATEGORY_AUTH', retryable: false });
  });

  it('refuses a wrong API key', async () => {
    const error = await failure(unary(clients.agents.listAgents.bind(clients.agents), {}, withKey('abc_not-a-real-key-at-all')));
    expect(error.code).toBe(status.UNAUTHENTICATED);
  });

  it('serves run and tool metrics', async () => {
    const res = await unary(clients.observer.getRunMetrics.bind(clients.observer), GetRunMetricsRequest.fromPartial({ sinceTs: 0 }), withKey(key));
    expect(res.metrics).toMatchObject({ total: 0, successRate: 0 });
    const tools = await unary(clients.observer.getToolMetrics.bind(clients.observer), { sinceTs: 0 }, withKey(key));
    expect(tools.tools).toEqual([]);
  });

  it('ends a server stream with the error and its seed payload', async () => {
    const stream = clients.agents.invokeAgent({ agentId: 'a', parentRunId: '', inputMessage: undefined, context: undefined }, withKey(key));
    const error = await new Promise<{ code: number; details: string; metadata: { get(k: string): unknown[] } }>((resolve) => stream.on('error', resolve));
    expect(error.code).toBe(status.INVALID_ARGUMENT);
    expect(ErrorMessage.decode(error.metadata.get('abc-error-bin')[0] as Buffer)).toMatchObject({ code: 'invalid_request', details: { field: 'parent_run_id' } });
  });
});

describe('core readiness follows the schema', () => {
  let db: TestDatabase;
  let orm: Orm;
  let core: Core;
  let clients: CoreClients;

  beforeAll(async () => {
    db = await createTestDatabase();
    orm = await createOrm({ url: db.url, poolMax: 2 });
    core = await startCore(coreOptions(orm, { migrationPollMs: 50 }));
    clients = connectCore(core.address);
  });
  afterAll(async () => {
    closeCore(clients);
    await core.close();
    await orm.close();
    await db.drop();
  });

  it('is NOT_SERVING while migrations are pending, and SERVING once they are applied', async () => {
    const check = () => unary(clients.health.check.bind(clients.health), { service: '' }).then((r) => r.status);
    expect(await check()).toBe(HealthCheckResponse_ServingStatus.NOT_SERVING);
    await migrate(orm);
    await expect.poll(check, { timeout: 5000, interval: 50 }).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });
});
