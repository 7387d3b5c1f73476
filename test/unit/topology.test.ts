import { describe, expect, it } from 'vitest';
import { EXECUTION_CONTRACT_MACHINE } from '../../src/domain/execution-contract.machine.js';
import { transition } from '../../src/domain/machine.js';
import { MACHINES, TOPOLOGY } from '../../src/domain/machine-catalog.js';
import { topologyOf } from '../../src/domain/topology.js';

describe('topology', () => {
  it.each(MACHINES.map((m) => [m.name, m] as const))('of %s equals the table the machine runs on', (_name, m) => {
    const t = topologyOf(m);
    // Every edge is a legal transition, and every legal transition is an edge.
    for (const e of t.edges) expect(transition(m, e.fromStatus, e.trigger)).toEqual({ ok: true, value: e.toStatus });
    const tableSize = m.states.reduce((n, s) => n + Object.keys(m.transitions[s] ?? {}).length, 0);
    expect(t.edges).toHaveLength(tableSize);
    // Every non-terminal state has a legal exit; terminal states have none.
    for (const node of t.nodes) expect(t.edges.some((e) => e.fromStatus === node.status)).toBe(!node.isTerminal);
    // Every ordered pair of distinct states is either legal or forbidden with a reason.
    const pairs = m.states.length * (m.states.length - 1);
    const legalPairs = new Set(t.edges.filter((e) => e.fromStatus !== e.toStatus).map((e) => `${e.fromStatus}>${e.toStatus}`));
    expect(t.forbiddenTransitions.length + legalPairs.size).toBe(pairs);
    expect(t.forbiddenTransitions.every((f) => f.reason.length > 0)).toBe(true);
    expect(t.nodes.filter((n) => n.isInitial).map((n) => n.status)).toEqual([m.initial]);
  });

  it('describes the seed 004 execution contract machine', () => {
    const t = topologyOf(EXECUTION_CONTRACT_MACHINE);
    expect(t.initialStatus).toBe('pending');
    expect([...t.terminalStatuses].sort()).toEqual(['cancelled', 'completed', 'failed', 'rejected']);
    expect(t.resumableStatuses).toEqual(['waiting']);
    expect(t.nodes.find((n) => n.status === 'waiting')).toEqual({ status: 'waiting', isTerminal: false, isInitial: false, isStable: true, isResumable: true });
    expect(t.nodes.find((n) => n.status === 'running')).toMatchObject({ isStable: false, isResumable: false });
    expect(t.edges).toContainEqual({ fromStatus: 'running', toStatus: 'waiting', trigger: 'suspend', allowedActors: ['tool_node', 'ecs_node'] });
    expect(t.forbiddenTransitions).toContainEqual({ fromStatus: 'completed', toStatus: 'running', reason: 'completed is terminal: nothing leaves it' });
  });

  it('covers every machine ABC runs', () => {
    expect(TOPOLOGY.map((t) => t.machine)).toEqual(['run', 'tool_call', 'approval', 'execution_contract', 'contract_lifecycle', 'contract_step']);
  });
});
