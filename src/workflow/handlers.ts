// WorkflowService over gRPC: definitions travel as JSON (Struct) documents.
import type { Workflow, WorkflowServiceService, WorkflowSession } from '../../gen/abc/workflow/v1/workflow.js';
import type { WorkflowSessionView, WorkflowSessions } from './sessions.js';
import { millis } from '../grpc/mappers.js';
import { requireKey } from '../access/principal.js';
import { targetTenant } from '../access/scopes.js';
import { invalidRequest } from '../domain/errors.js';
import type { ServiceHandlers } from '../grpc/bind.js';
import type { RegisteredWorkflow, Workflows } from './registry.js';

export function workflowHandlers(workflows: Workflows, sessions: WorkflowSessions): ServiceHandlers<typeof WorkflowServiceService> {
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
    async getWorkflowSession(req, ctx) {
      if (!req.sessionId) throw invalidRequest('session_id is required', 'session_id');
      return { session: toSession(await sessions.get(ctx.principal, req.sessionId)) };
    },
    async advanceSession(req, ctx) {
      if (!req.sessionId) throw invalidRequest('session_id is required', 'session_id');
      if (!req.toPhase) throw invalidRequest('to_phase is required', 'to_phase');
      if (req.toPhase.length > 64) throw invalidRequest('to_phase is at most 64 characters', 'to_phase');
      if (req.reason.length > 500) throw invalidRequest('reason is at most 500 characters', 'reason');
      return { session: toSession(await sessions.advance(ctx.principal, req.sessionId, req.toPhase, req.reason)) };
    },
  };
}

const toSession = (v: WorkflowSessionView): WorkflowSession => ({
  sessionId: v.session.session_id,
  workflowId: v.session.workflow_id,
  version: v.session.workflow_version,
  phase: v.session.phase,
  phaseTurns: v.session.phase_turns,
  states: v.states,
  moves: v.moves.map((m) => ({
    fromPhase: m.from_phase, toPhase: m.to_phase, trigger: m.trigger, actor: m.actor, reason: m.reason, metadata: m.metadata, accepted: m.accepted, runId: m.run_id ?? '', createdAt: millis(m.created_at),
  })),
});

const toWorkflow = (w: RegisteredWorkflow): Workflow => ({
  workflowId: w.definition.workflow_id,
  version: w.definition.version,
  definition: w.definition as unknown as Record<string, unknown>,
  platform: w.platform,
});
