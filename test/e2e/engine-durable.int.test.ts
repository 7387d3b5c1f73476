// A human's answer is never lost: an execution waiting for a human outlives the
// core that was running it, and the answer given to another core finishes it.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeCore, connectCore, type CoreClients } from '../../gateway/core-client.js';
import { HumanAction, SubmitContractRequest } from '../../gen/abc/ingress/v1/ingress.js';
import { ApiKeys } from '../../src/access/api-keys.js';
import { startCore, type Core } from '../../src/main/core.js';
import { upsertTool, fromJson } from '../../src/orchestrator/tool-registry.js';
import { ToolKinds } from '../../src/execution/tool-kinds.js';
import { createOrm, type Orm } from '../../src/store/orm.js';
import { FAST_RETRY, coreOptions } from '../support/core.js';
import { assemblyMessage, importSamplePortfolios, referenceAssembly, request } from '../support/contracts.js';
import { migratedOrm } from '../support/db.js';
import { unary, withKey } from '../support/grpc.js';
import { startToolServer, type ToolServer } from '../support/tool-server.js';

let store: Awaited<ReturnType<typeof migratedOrm>>;
let tools: ToolServer;
let key: string;

interface Node {
  orm: Orm;
  core: Core;
  clients: CoreClients;
  stop(): Promise<void>;
}

async function node(): Promise<Node> {
  const orm = await createOrm({ url: store.db.url, poolMax: 4 });
  const core = await startCore(coreOptions(orm, { publicBaseUrl: 'http://abc.test', retry: FAST_RETRY, drainTimeoutMs: 500, contracts: { workers: 1, leaseMs: 1000 } }));
  const clients = connectCore(core.address);
  return { orm, core, clients, stop: async () => (closeCore(clients), await core.close(), await orm.close()) };
}

beforeAll(async () => {
  store = await migratedOrm();
  tools = await startToolServer();
  key = (await new ApiKeys(store.orm).create('test')).key;
  await importSamplePortfolios(store.orm);
  await upsertTool(store.orm.em.fork(), new ToolKinds(), 'default', fromJson({ name: 'wire', kind: 'http', endpoint: tools.endpoint('wire'), permission_level: 'ADMIN', side_effect: true }, 5000));
});
afterAll(async () => {
  await tools?.close();
  await store?.close();
});

it('keeps a WAIT_HUMAN execution across a core restart, and another core finishes it on the answer', async () => {
  const a = await node();
  const assembly = referenceAssembly();
  assembly.version = '1.70.0';
  assembly.capabilities.push({ name: 'tool.wire', kind: 'TOOL' });
  assembly.steps.push({ id: 'wire', label: 'Wire funds', tool_name: 'tool.wire', input: {}, dependencies: ['value_positions'] });
  await unary(a.clients.decision.registerAssembly.bind(a.clients.decision), { assembly: assemblyMessage(assembly), platform: false }, withKey(key));
  const submitted = await unary(a.clients.ingress.submitContract.bind(a.clients.ingress), SubmitContractRequest.fromPartial({ body: request() }), withKey(key));
  const ticket = submitted.ticket;
  const poll = (n: Node) => unary(n.clients.ingress.pollTicket.bind(n.clients.ingress), { ticket, waitMs: 0, noWait: true }, withKey(key));
  await expect.poll(async () => (await poll(a)).lifecycleState, { timeout: 10_000 }).toBe('WAIT_HUMAN');
  await a.stop();

  const b = await node();
  try {
    expect((await poll(b)).lifecycleState).toBe('WAIT_HUMAN');
    const answered = await unary(b.clients.ingress.submitHumanFeedback.bind(b.clients.ingress), { ticket, action: HumanAction.HUMAN_ACTION_CONTINUE, feedback: 'approved', data: undefined }, withKey(key));
    expect(answered).toMatchObject({ ticket, status: 'TICKET_STATUS_RUNNING', lifecycleState: 'STEP_EXECUTION' });
    await expect.poll(async () => (await poll(b)).status, { timeout: 10_000 }).toBe('TICKET_STATUS_SUCCEEDED');
    expect(tools.calls('wire')).toHaveLength(1);
    const [memory] = await b.orm.em.fork().execute<{ value: { action: string; feedback: string } }[]>("SELECT value FROM memory WHERE scope = 'SESSION' AND scope_id = ? AND key = 'human_feedback:1'", [ticket]);
    expect(memory!.value).toMatchObject({ action: 'continue', feedback: 'approved' });
  } finally {
    await b.stop();
  }
});
