// Phase workflow definitions (seed 003): register, list, read. The core checks
// a definition against its JSON Schema and the rules between its parts.
import type { FastifyInstance } from 'fastify';
import type { Workflow, WorkflowSession } from '../../gen/abc/workflow/v1/workflow.js';
import type { CoreClients } from '../core-client.js';
import { call } from '../grpc-call.js';
import { platformQuery } from '../boundary.js';

const workflowJson = (w: Workflow) => ({ workflow_id: w.workflowId, version: w.version, platform: w.platform, definition: w.definition ?? {} });

const sessionJson = (s: WorkflowSession) => ({
  session_id: s.sessionId,
  workflow_id: s.workflowId,
  version: s.version,
  phase: s.phase,
  phase_turns: s.phaseTurns,
  states: s.states ?? {},
  moves: s.moves.map((m) => ({
    from_phase: m.fromPhase, to_phase: m.toPhase, trigger: m.trigger, actor: m.actor, reason: m.reason, metadata: m.metadata ?? {}, accepted: m.accepted, run_id: m.runId || null, created_at: m.createdAt,
  })),
});

const sessionParams = { type: 'object', required: ['session_id'], properties: { session_id: { type: 'string', minLength: 1, maxLength: 128 } } } as const;

export function workflowRoutes(app: FastifyInstance, core: CoreClients): void {
  app.post<{ Body: Record<string, unknown>; Querystring: { platform?: boolean } }>(
    '/v1/workflows',
    { schema: { body: { type: 'object' }, querystring: platformQuery }, bodyLimit: 2 * 1024 * 1024 },
    async (req, reply) => {
      const res = await call(core.workflows.registerWorkflow.bind(core.workflows), { definition: req.body, platform: req.query.platform ?? false }, req);
      return reply.code(res.created ? 201 : 200).send({ workflow: workflowJson(res.workflow!), created: res.created });
    },
  );

  app.get<{ Querystring: { workflow_id?: string } }>(
    '/v1/workflows',
    { schema: { querystring: { type: 'object', additionalProperties: false, properties: { workflow_id: { type: 'string', maxLength: 128 } } } } },
    async (req) => ({ workflows: (await call(core.workflows.listWorkflows.bind(core.workflows), { workflowId: req.query.workflow_id ?? '' }, req)).workflows.map(workflowJson) }),
  );

  app.get<{ Params: { id: string }; Querystring: { version?: string } }>(
    '/v1/workflows/:id',
    { schema: { querystring: { type: 'object', additionalProperties: false, properties: { version: { type: 'string', pattern: '^\\d+\\.\\d+\\.\\d+$', maxLength: 32 } } } } },
    async (req) => ({ workflow: workflowJson((await call(core.workflows.getWorkflow.bind(core.workflows), { workflowId: req.params.id, version: req.query.version ?? '' }, req)).workflow!) }),
  );

  app.get<{ Params: { session_id: string } }>('/v1/workflow-sessions/:session_id', { schema: { params: sessionParams } }, async (req) => ({
    session: sessionJson((await call(core.workflows.getWorkflowSession.bind(core.workflows), { sessionId: req.params.session_id }, req)).session!),
  }));

  // A client's own phase move: a `route` transition of the session's table.
  app.post<{ Params: { session_id: string }; Body: { to_phase: string; reason?: string } }>(
    '/v1/workflow-sessions/:session_id(^[^:]+)::advance',
    {
      schema: {
        params: sessionParams,
        body: { type: 'object', additionalProperties: false, required: ['to_phase'], properties: { to_phase: { type: 'string', minLength: 1, maxLength: 64 }, reason: { type: 'string', maxLength: 500 } } },
      },
    },
    async (req) => ({
      session: sessionJson((await call(core.workflows.advanceSession.bind(core.workflows), { sessionId: req.params.session_id, toPhase: req.body.to_phase, reason: req.body.reason ?? '' }, req)).session!),
    }),
  );
}
