// The observer's HTTP views (seed 004 v2), read-only.
import type { FastifyInstance } from 'fastify';
import type { StateMachineTopology } from '../../gen/abc/observer/v1/views.js';
import type { CoreClients } from '../core-client.js';
import { call } from '../grpc-call.js';

const topologyJson = (t: StateMachineTopology) => ({
  machine: t.machine,
  nodes: t.nodes.map((n) => ({ status: n.status, is_terminal: n.isTerminal, is_initial: n.isInitial, is_stable: n.isStable, is_resumable: n.isResumable })),
  edges: t.edges.map((e) => ({ from_status: e.fromStatus, to_status: e.toStatus, trigger: e.trigger, allowed_actors: e.allowedActors })),
  forbidden_transitions: t.forbiddenTransitions.map((f) => ({ from: f.fromStatus, to: f.toStatus, reason: f.reason })),
  terminal_statuses: t.terminalStatuses,
  resumable_statuses: t.resumableStatuses,
  initial_status: t.initialStatus,
});

export function observerRoutes(app: FastifyInstance, core: CoreClients): void {
  app.get<{ Querystring: { machine?: string } }>(
    '/api/execution/topology',
    { schema: { querystring: { type: 'object', additionalProperties: false, properties: { machine: { type: 'string', maxLength: 64 } } } } },
    async (req) => {
      const res = await call(core.observer.getTopology.bind(core.observer), { machine: req.query.machine ?? '' }, req);
      return { machines: res.machines.map(topologyJson) };
    },
  );
}
