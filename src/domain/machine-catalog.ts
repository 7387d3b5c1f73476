// Every state machine ABC runs, for the observer's topology.
import { APPROVAL_MACHINE } from './approval.machine.js';
import { CONTRACT_LIFECYCLE_MACHINE, CONTRACT_STEP_MACHINE } from './contract-lifecycle.machine.js';
import { EXECUTION_CONTRACT_MACHINE } from './execution-contract.machine.js';
import { RUN_MACHINE } from './run.machine.js';
import { TOOL_CALL_MACHINE } from './tool-call.machine.js';
import type { Machine } from './machine.js';
import { topologyOf, type StateMachineTopology } from './topology.js';

export const MACHINES: Machine<string, string>[] = [
  RUN_MACHINE, TOOL_CALL_MACHINE, APPROVAL_MACHINE, EXECUTION_CONTRACT_MACHINE, CONTRACT_LIFECYCLE_MACHINE, CONTRACT_STEP_MACHINE,
];

/** The topology of every machine, derived from the tables they run on. */
export const TOPOLOGY: StateMachineTopology[] = MACHINES.map((m) => topologyOf(m));
