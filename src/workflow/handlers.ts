// WorkflowService over gRPC: definitions travel as JSON (Struct) documents.
import type { Workflow, WorkflowServiceService } from '../../gen/abc/workflow/v1/workflow.js';
import { requireKey } from '../access/principal.js';
import { targetTenant } from '../access/scopes.js';
import { invalidRequest } from '../domain/errors.js';
import type { ServiceHandlers } from '../grpc/bind.js';
import type { RegisteredWorkflow, Workflows } from './registry.js';

export function workflowHandlers(workflows: Workflows): ServiceHandlers<typeof WorkflowServiceService> {
  return {
    async registerWorkflow(req, ctx) {
      const tenantId = targetTenant(requireKey(ctx.principal), req.platform);
      if (!req.definition) throw invalidRequest('definition is required', 'definition');
      const out = await workflows.register(tenantId, req.definition);
      return { workflow: toWorkflow(out.workflow), created: out.created };
    },
    async listWorkflows(req, ctx) {
      const { tenantId } = requireKey(ctx.principal);
      const all = await workflows.list(tenantId);
      return { workflows: all.filter((w) => !req.workflowId || w.definition.workflow_id === req.workflowId).map(toWorkflow) };
    },
    async getWorkflow(req, ctx) {
      const { tenantId } = requireKey(ctx.principal);
      if (!req.workflowId) throw invalidRequest('workflow_id is required', 'workflow_id');
      return { workflow: toWorkflow(await workflows.get(tenantId, req.workflowId, req.version || undefined)) };
    },
  };
}

const toWorkflow = (w: RegisteredWorkflow): Workflow => ({
  workflowId: w.definition.workflow_id,
  version: w.definition.version,
  definition: w.definition as unknown as Record<string, unknown>,
  platform: w.platform,
});
