// Phase workflow definitions (seed 003): register, list, read. The core checks
// a definition against its JSON Schema and the rules between its parts.
import type { FastifyInstance } from 'fastify';
import type { Workflow } from '../../gen/abc/workflow/v1/workflow.js';
import type { CoreClients } from '../core-client.js';
import { call } from '../grpc-call.js';
import { platformQuery } from '../boundary.js';

const workflowJson = (w: Workflow) => ({ workflow_id: w.workflowId, version: w.version, platform: w.platform, definition: w.definition ?? {} });

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
}
