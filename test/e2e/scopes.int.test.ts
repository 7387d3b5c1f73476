// Walks the one RPC -> scope table (src/access/scopes.ts) over real gRPC: every
// method of every service has a row, a key without the row's scope is refused
// with `forbidden` before the handler runs, a key with it gets past, and a run
// token reaches exactly the rows that admit it.
import { makeGenericClientConstructor, credentials, type Client, type Metadata, type MethodDefinition, type ServiceDefinition, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DecisionServiceService } from '../../gen/abc/decision/v1/decision.js';
import { IngressServiceService } from '../../gen/abc/ingress/v1/ingress.js';
import { ObserverServiceService } from '../../gen/abc/observer/v1/observer.js';
import { AgentServiceService } from '../../gen/abc/orchestrator/v1/agent.js';
import { ApprovalServiceService } from '../../gen/abc/orchestrator/v1/approval.js';
import { ContextStoreServiceService } from '../../gen/abc/orchestrator/v1/context.js';
import { LlmProxyServiceService } from '../../gen/abc/orchestrator/v1/llm.js';
import { RunServiceService } from '../../gen/abc/orchestrator/v1/run.js';
import { SessionServiceService } from '../../gen/abc/orchestrator/v1/session.js';
import { ToolServiceService } from '../../gen/abc/orchestrator/v1/tool.js';
import { WorkflowServiceService } from '../../gen/abc/workflow/v1/workflow.js';
import { ApiKeys } from '../../src/access/api-keys.js';
import { authorize, RPC_ACCESS, SCOPES, type Scope } from '../../src/access/scopes.js';
import { startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { withKey } from '../support/grpc.js';
import { liveRun, type LiveRun } from '../support/live-run.js';

const SERVICES: ServiceDefinition[] = [
  IngressServiceService, RunServiceService, AgentServiceService, ToolServiceService, ApprovalServiceService,
  LlmProxyServiceService, SessionServiceService, ContextStoreServiceService, DecisionServiceService, ObserverServiceService, WorkflowServiceService,
];
const METHODS = SERVICES.flatMap((d) => Object.entries(d).map(([name, m]) => ({ name, method: m as MethodDefinition<unknown, unknown>, service: d })));

let s: TestStack;
let agent: FakeAgent;
let run: LiveRun;
const keyOf = {} as Record<Scope, string>;
const clients = new Map<ServiceDefinition, Client>();

beforeAll(async () => {
  s = await startTestStack();
  agent = await startFakeAgent();
  for (const scope of SCOPES) keyOf[scope] = (await new ApiKeys(s.orm).create(`only-${scope}`, { scopes: [scope] })).key;
  for (const d of SERVICES) {
    const Ctor = makeGenericClientConstructor(d, '');
    clients.set(d, new Ctor(s.core.address, credentials.createInsecure()) as never);
  }
  expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'walker', name: 'walker', endpoint: agent.url } })).status).toBe(200);
  run = await liveRun(s, agent, { agentId: 'walker' });
});
afterAll(async () => {
  run?.release();
  run?.ws.close();
  for (const c of clients.values()) c.close();
  await agent?.close();
  await s?.close();
});

/** Calls any method with an empty request (zero bytes: every field at its default); resolves with its error, or null when it answered. */
function call(service: ServiceDefinition, _name: string, method: MethodDefinition<unknown, unknown>, metadata: Metadata): Promise<ServiceError | null> {
  const client = clients.get(service)!;
  const empty = () => Buffer.alloc(0);
  const options = { deadline: Date.now() + 5000 };
  return new Promise((resolve) => {
    if (!method.responseStream) {
      client.makeUnaryRequest(method.path, empty, method.responseDeserialize, {}, metadata, options, (error: ServiceError | null) => resolve(error));
      return;
    }
    const stream = client.makeServerStreamRequest(method.path, empty, method.responseDeserialize, {}, metadata, options);
    // The first message or status tells: a refusal comes before any message.
    stream.on('data', () => {
      stream.cancel();
      resolve(null);
    });
    stream.on('error', (error: ServiceError) => resolve(error.code === 1 ? null : error));
    stream.on('end', () => resolve(null));
  });
}

const refusedForScope = (error: ServiceError | null) => error?.code === 7 && /lacks the \w+ scope/.test(error.details);
const refusedForRunToken = (error: ServiceError | null) => error?.code === 7 && /needs an API key/.test(error.details);

describe('the RPC scope table', () => {
  it('has exactly one row for every method of every service', () => {
    expect(Object.keys(RPC_ACCESS).sort()).toEqual(METHODS.map((m) => m.method.path).sort());
  });

  it.each(METHODS.filter((m) => RPC_ACCESS[m.method.path]!.scope !== 'anonymous').map((m) => [m.method.path, m] as const))(
    '%s: refuses a key without its scope and admits one with it',
    async (_path, { name, method, service }) => {
      const scope = RPC_ACCESS[method.path]!.scope as Scope;
      for (const other of SCOPES.filter((x) => x !== scope && x !== 'admin')) {
        const error = await call(service, name, method, withKey(keyOf[other]));
        expect(refusedForScope(error), `${other} key on ${method.path}`).toBe(true);
        expect(error!.details).toContain(scope);
      }
      for (const holder of [scope, 'admin'] as const) {
        const error = await call(service, name, method, withKey(keyOf[holder]));
        expect(refusedForScope(error), `${holder} key on ${method.path}: ${error?.details}`).toBe(false);
      }
    },
  );

  it.each(METHODS.map((m) => [m.method.path, m] as const))('%s: a run token gets in only where the table says', async (_path, { name, method, service }) => {
    const access = RPC_ACCESS[method.path]!;
    if (access.scope === 'anonymous') return; // IM authenticates in its hello, with an API key
    const error = await call(service, name, method, withKey(run.token));
    expect(refusedForRunToken(error), `${method.path}: ${error?.details}`).toBe(!access.runToken);
  });

  it('refuses a method the table does not know, even to an admin', () => {
    const admin = { kind: 'key', keyId: 'k', name: 'k', tenantId: 'default', scopes: ['admin'], userIds: null } as const;
    expect(() => authorize(admin, '/abc.orchestrator.v1.RunService/NoSuchMethod')).toThrow(/declares no scope/);
  });
});
