// gRPC for generic clients: server reflection lists and describes the core's
// services, and a client that knows ABC only from reflection calls it; errors
// carry the standard google.rpc.Status (grpc-status-details-bin).
import path from 'node:path';
import { credentials, loadPackageDefinition, type Client, type ServiceError } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import descriptor from 'protobufjs/ext/descriptor/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RegisterAgentRequest } from '../../gen/abc/orchestrator/v1/agent.js';
import { ErrorInfo } from '../../gen/google/rpc/error_details.js';
import { Status } from '../../gen/google/rpc/status.js';
import { failure, unary, withKey } from '../support/grpc.js';
import { startTestCore, type TestCore } from '../support/core.js';

let s: TestCore;
let off: TestCore;
beforeAll(async () => {
  s = await startTestCore();
  off = await startTestCore({ grpcReflection: false });
});
afterAll(async () => {
  await s?.close();
  await off?.close();
});

const REFLECTION = (version: string) => path.resolve(`node_modules/@grpc/reflection/build/proto/grpc/reflection/${version}/reflection.proto`);
type Reflection = Client & { ServerReflectionInfo(): import('@grpc/grpc-js').ClientDuplexStream<Record<string, unknown>, Record<string, any>> };

function reflectionClient(address: string, version: 'v1' | 'v1alpha' = 'v1'): Reflection {
  const pkg = loadPackageDefinition(loadSync(REFLECTION(version), { keepCase: true, longs: String, defaults: true, oneofs: true })) as any;
  return new pkg.grpc.reflection[version].ServerReflection(address, credentials.createInsecure());
}

/** One request on the reflection stream, its one answer. */
function ask(client: Reflection, request: Record<string, unknown>): Promise<Record<string, any>> {
  return new Promise((resolve, reject) => {
    const call = client.ServerReflectionInfo();
    call.on('data', (res) => {
      resolve(res);
      call.end();
    });
    call.on('error', reject);
    call.write(request);
  });
}

describe('gRPC server reflection', () => {
  it('lists every service, and a client built from reflection alone calls one', async () => {
    await unary(s.clients.agents.registerAgent.bind(s.clients.agents), RegisterAgentRequest.fromPartial({ agentId: 'reflected', name: 'Reflected', endpoint: 'http://127.0.0.1:9' }), withKey(s.key));
    const client = reflectionClient(s.core.address);
    const listed = await ask(client, { list_services: '' });
    const names = (listed.list_services_response.service as { name: string }[]).map((x) => x.name);
    for (const name of ['abc.orchestrator.v1.RunService', 'abc.orchestrator.v1.AgentService', 'abc.ingress.v1.IngressService', 'abc.observer.v1.ObserverService', 'abc.workflow.v1.WorkflowService', 'grpc.health.v1.Health']) {
      expect(names).toContain(name);
    }

    // The file of AgentService, with its imports, as descriptors: enough to build a client.
    const files = await ask(client, { file_containing_symbol: 'abc.orchestrator.v1.AgentService' });
    const set = descriptor.FileDescriptorSet.create({
      file: (files.file_descriptor_response.file_descriptor_proto as Buffer[]).map((b) => descriptor.FileDescriptorProto.decode(b)),
    });
    const root = (protobuf.Root as unknown as { fromDescriptor(set: unknown): protobuf.Root }).fromDescriptor(set);
    const service = root.lookupService('abc.orchestrator.v1.AgentService');
    const list = service.methods.ListAgents!;
    list.resolve();
    const Request = list.resolvedRequestType!;
    const Response = list.resolvedResponseType!;
    const generic = new (await import('@grpc/grpc-js')).Client(s.core.address, credentials.createInsecure());
    const answer = await new Promise<Record<string, unknown>>((resolve, reject) =>
      generic.makeUnaryRequest(
        '/abc.orchestrator.v1.AgentService/ListAgents',
        (req: object) => Buffer.from(Request.encode(Request.fromObject(req)).finish()),
        (bytes: Buffer) => Response.toObject(Response.decode(bytes), { defaults: true }),
        {},
        withKey(s.key),
        (error, res) => (error ? reject(error) : resolve(res as Record<string, unknown>)),
      ),
    );
    // Decoded with the reflected descriptors alone: the agent just registered is there.
    expect(answer.agents).toEqual([expect.objectContaining({ name: 'Reflected', endpoint: 'http://127.0.0.1:9' })]);
    generic.close();
    client.close();

    // Older clients (grpcurl before v1) ask v1alpha.
    const alpha = reflectionClient(s.core.address, 'v1alpha');
    expect((await ask(alpha, { list_services: '' })).list_services_response.service.map((x: { name: string }) => x.name)).toEqual(names);
    alpha.close();
  });

  it('is off when ABC_GRPC_REFLECTION is false', async () => {
    const client = reflectionClient(off.core.address);
    await expect(ask(client, { list_services: '' })).rejects.toMatchObject({ code: 12 });
    client.close();
  });
});

describe('grpc-status-details-bin', () => {
  it('carries google.rpc.Status with an ErrorInfo of the seed code, category and trace', async () => {
    const metadata = withKey(s.key);
    metadata.set('traceparent', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
    const error: ServiceError = await failure(unary(s.clients.runs.getRun.bind(s.clients.runs), { runId: 'run_missing' }, metadata));
    const [bytes] = error.metadata.get('grpc-status-details-bin') as Buffer[];
    const status = Status.decode(bytes!);
    expect(status.code).toBe(error.code);
    expect(status.message).toBe(error.details);
    const [info] = status.details.filter((d) => d.typeUrl === 'type.googleapis.com/google.rpc.ErrorInfo');
    expect(ErrorInfo.decode(info!.value)).toEqual({
      reason: 'not_found',
      domain: 'abc',
      metadata: { category: expect.any(String), retryable: 'false', trace_id: '4bf92f3577b34da6a3ce929d0e0e4736' },
    });
    // ABC's own trailer is still there.
    expect(error.metadata.get('abc-error-bin')).toHaveLength(1);
  });
});
