// Which service implements what.
import type { ServiceDefinition } from '@grpc/grpc-js';
import type pg from 'pg';
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
import { workflowHandlers } from '../workflow/handlers.js';
import type { Workflows } from '../workflow/registry.js';
import { WorkflowSessions } from '../workflow/sessions.js';
import type { ServiceHandlers } from '../grpc/bind.js';
import { contractHandlers } from '../contracts/handlers.js';
import type { ContractService } from '../contracts/service.js';
import type { Decision } from '../decision/decision.js';
import { decisionHandlers } from '../decision/handlers.js';
import type { ApiKeys } from '../access/api-keys.js';
import type { StreamTokens } from '../access/stream-tokens.js';
import { connect } from '../ingress/connect.js';
import type { Logger } from '../runtime/log.js';
import { observerHandlers } from '../observer/handlers.js';
import type { HealthOptions } from '../orchestrator/agents.js';
import { agentHandlers, contextHandlers, runHandlers, sessionHandlers } from '../orchestrator/handlers.js';
import type { LlmProxy } from '../orchestrator/llm-proxy.js';
import type { ToolCalls } from '../orchestrator/tool-calls.js';
import type { Presence } from '../store/presence.js';
import { approvalHandlers, toolHandlers } from '../orchestrator/tool-handlers.js';
import type { Runs } from '../orchestrator/runs.js';
import type { EventBus } from '../store/event-bus.js';
import type { Orm } from '../store/orm.js';

export interface ServiceEntry<D extends ServiceDefinition = ServiceDefinition> {
  name: string;
  definition: D;
  handlers: ServiceHandlers<D>;
}

const entry = <D extends ServiceDefinition>(name: string, definition: D, handlers: ServiceHandlers<D>): ServiceEntry =>
  ({ name, definition, handlers }) as unknown as ServiceEntry;

export interface ServiceDeps {
  orm: Orm;
  bus: EventBus;
  runs: Runs;
  keys: ApiKeys;
  log: Logger;
  health: HealthOptions;
  llm: LlmProxy;
  toolCalls: ToolCalls;
  presence: Presence;
  toolTimeoutMs: number;
  helloTimeoutMs: number;
  contracts: ContractService;
  decision: Decision;
  /** Read-only sessions for the observer's projections. */
  readOnly: pg.Pool;
  streamTokens: StreamTokens;
  workflows: Workflows;
}

/** Every ABC service with its handlers. */
export function services(deps: ServiceDeps): ServiceEntry[] {
  return [
    entry('abc.ingress.v1.IngressService', IngressServiceService, {
      connect: (requests, ctx) => connect(deps, requests, ctx),
      ...contractHandlers(deps.contracts),
    }),
    entry('abc.orchestrator.v1.RunService', RunServiceService, runHandlers(deps.runs)),
    entry('abc.orchestrator.v1.AgentService', AgentServiceService, agentHandlers(deps.orm, deps.health, deps.runs)),
    entry('abc.orchestrator.v1.ToolService', ToolServiceService, toolHandlers(deps.orm, deps.toolCalls, deps.toolTimeoutMs)),
    entry('abc.orchestrator.v1.ApprovalService', ApprovalServiceService, approvalHandlers(deps.toolCalls)),
    entry('abc.orchestrator.v1.LlmProxyService', LlmProxyServiceService, deps.llm.handlers()),
    entry('abc.orchestrator.v1.SessionService', SessionServiceService, sessionHandlers(deps.orm)),
    entry('abc.orchestrator.v1.ContextStoreService', ContextStoreServiceService, contextHandlers(deps.orm)),
    entry('abc.decision.v1.DecisionService', DecisionServiceService, decisionHandlers(deps.decision)),
    entry('abc.observer.v1.ObserverService', ObserverServiceService, observerHandlers(deps.orm, deps.bus, deps.readOnly, deps.streamTokens, (tenantId) => deps.workflows.topology(tenantId))),
    entry('abc.workflow.v1.WorkflowService', WorkflowServiceService, workflowHandlers(deps.workflows, new WorkflowSessions(() => deps.orm.em.fork(), deps.workflows))),
  ];
}
