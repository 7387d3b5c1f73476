// StateMachineTopology (seed 004), derived from a machine's own table, so the
// documentation of a machine can never drift from the machine that runs.
import type { Machine } from './machine.js';

export interface StateNode {
  status: string;
  isTerminal: boolean;
  isInitial: boolean;
  /** Terminal, or resumable (waiting on something outside). */
  isStable: boolean;
  isResumable: boolean;
}

export interface StateTransitionEdge {
  fromStatus: string;
  toStatus: string;
  trigger: string;
  allowedActors: string[];
}

export interface ForbiddenTransition {
  fromStatus: string;
  toStatus: string;
  reason: string;
}

export interface StateMachineTopology {
  machine: string;
  nodes: StateNode[];
  edges: StateTransitionEdge[];
  forbiddenTransitions: ForbiddenTransition[];
  terminalStatuses: string[];
  resumableStatuses: string[];
  initialStatus: string;
}

export function topologyOf<S extends string, T extends string>(m: Machine<S, T>): StateMachineTopology {
  const resumable = new Set<string>(m.resumable ?? []);
  const edges: StateTransitionEdge[] = m.states.flatMap((from) =>
    (Object.entries(m.transitions[from]) as [T, S][]).map(([trigger, to]) => ({ fromStatus: from, toStatus: to, trigger, allowedActors: [...m.actors[trigger]] })),
  );
  const legal = new Set(edges.map((e) => `${e.fromStatus}>${e.toStatus}`));
  const forbiddenTransitions = m.states.flatMap((from) =>
    m.states
      .filter((to) => to !== from && !legal.has(`${from}>${to}`))
      .map((to) => ({
        fromStatus: from,
        toStatus: to,
        reason: m.isTerminal(from) ? `${from} is terminal: nothing leaves it` : to === m.initial ? `nothing returns to the initial state ${to}` : `no trigger leads from ${from} to ${to}`,
      })),
  );
  return {
    machine: m.name,
    nodes: m.states.map((status) => ({
      status,
      isTerminal: m.isTerminal(status),
      isInitial: status === m.initial,
      isStable: m.isTerminal(status) || resumable.has(status),
      isResumable: resumable.has(status),
    })),
    edges,
    forbiddenTransitions,
    terminalStatuses: [...m.terminal],
    resumableStatuses: [...resumable],
    initialStatus: m.initial,
  };
}
