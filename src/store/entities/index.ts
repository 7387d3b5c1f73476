import { ApiKey, IdempotencyKey, Secret, Tenant, TokenUsage } from './access.js';
import {
  Assembly,
  Ticket,
  ContractStep,
  ContractVersionRow,
  ExecutionContract,
  ExecutionTransition,
  FrozenPlan,
  Memory,
  Snapshot,
  TicketEvent,
} from './contracts.js';
import { Agent, ClientConnection, ContextBlob, ContextBlobVersion, Event, Message, Run, Session } from './im.js';
import { Approval, Policy, Tool, ToolCall } from './tools.js';
import { PhaseTransition, WorkflowRow, WorkflowSession } from './workflows.js';

export * from './access.js';
export * from './contracts.js';
export * from './im.js';
export * from './tools.js';
export * from './workflows.js';

/** Every entity, for the ORM configuration. */
export const entities = [
  Session, Message, Run, Event, Agent, ContextBlob, ContextBlobVersion, ClientConnection,
  Tool, ToolCall, Approval, Policy,
  ContractVersionRow, Assembly, FrozenPlan, Ticket, ContractStep, TicketEvent, ExecutionContract, ExecutionTransition, Snapshot, Memory,
  IdempotencyKey, ApiKey, Tenant, TokenUsage, Secret,
  WorkflowRow, WorkflowSession, PhaseTransition,
];
