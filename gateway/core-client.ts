// gRPC clients of the core. The gateway speaks to the core like any other client.
import { credentials, Metadata, type ChannelOptions } from '@grpc/grpc-js';
import { DecisionServiceClient } from '../gen/abc/decision/v1/decision.js';
import { IngressServiceClient } from '../gen/abc/ingress/v1/ingress.js';
import { ObserverServiceClient } from '../gen/abc/observer/v1/observer.js';
import { AgentServiceClient } from '../gen/abc/orchestrator/v1/agent.js';
import { ApprovalServiceClient } from '../gen/abc/orchestrator/v1/approval.js';
import { ContextStoreServiceClient } from '../gen/abc/orchestrator/v1/context.js';
import { LlmProxyServiceClient } from '../gen/abc/orchestrator/v1/llm.js';
import { RunServiceClient } from '../gen/abc/orchestrator/v1/run.js';
import { SessionServiceClient } from '../gen/abc/orchestrator/v1/session.js';
import { ToolServiceClient } from '../gen/abc/orchestrator/v1/tool.js';
import { WorkflowServiceClient } from '../gen/abc/workflow/v1/workflow.js';
import { HealthClient } from '../gen/grpc/health/v1/health.js';

export type CoreClients = ReturnType<typeof connectCore>;

/** TLS to the core: the CA to trust and, for mutual TLS, the gateway's own certificate and key. */
export interface CoreTls {
  ca: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

/**
 * The core bounds what it answers (a page of events, a batch of IM frames), and
 * a page of 1,000 events of 16 KB is larger than grpc-js's default limit of
 * 4 MB on what a client receives: the gateway takes what its core sends.
 */
const CORE_CHANNEL: ChannelOptions = { 'grpc.max_receive_message_length': -1 };

/** One channel per service client, all to the same core address. */
export function connectCore(address: string, extra: ChannelOptions = {}, tls?: CoreTls) {
  const creds = tls ? credentials.createSsl(tls.ca, tls.key ?? null, tls.cert ?? null) : credentials.createInsecure();
  const options = { ...CORE_CHANNEL, ...extra };
  return {
    health: new HealthClient(address, creds, options),
    ingress: new IngressServiceClient(address, creds, options),
    runs: new RunServiceClient(address, creds, options),
    agents: new AgentServiceClient(address, creds, options),
    tools: new ToolServiceClient(address, creds, options),
    approvals: new ApprovalServiceClient(address, creds, options),
    llm: new LlmProxyServiceClient(address, creds, options),
    sessions: new SessionServiceClient(address, creds, options),
    context: new ContextStoreServiceClient(address, creds, options),
    decision: new DecisionServiceClient(address, creds, options),
    observer: new ObserverServiceClient(address, creds, options),
    workflows: new WorkflowServiceClient(address, creds, options),
  };
}

export function closeCore(clients: CoreClients): void {
  for (const client of Object.values(clients)) client.close();
}

/** Metadata carrying the caller's API key through to the core. */
export function authMetadata(apiKey: string | undefined): Metadata {
  const metadata = new Metadata();
  if (apiKey) metadata.set('authorization', `Bearer ${apiKey}`);
  return metadata;
}
