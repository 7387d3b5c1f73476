import { ApiKey, IdempotencyKey } from './access.js';
import {
  Assembly,
  ContractExecution,
  ExecutionContract,
  ExecutionTransition,
  FrozenPlan,
  Memory,
  Snapshot,
} from './contracts.js';
import { Agent, ClientConnection, ContextBlob, ContextBlobVersion, Event, Message, Run, Session } from './im.js';
import { Approval, Policy, Tool, ToolCall } from './tools.js';

export * from './access.js';
export * from './contracts.js';
export * from './im.js';
export * from './tools.js';

/** Every entity, for the ORM configuration. */
export const entities = [
  Session, Message, Run, Event, Agent, ContextBlob, ContextBlobVersion, ClientConnection,
  Tool, ToolCall, Approval, Policy,
  Assembly, FrozenPlan, ContractExecution, ExecutionContract, ExecutionTransition, Snapshot, Memory,
  IdempotencyKey, ApiKey,
];
