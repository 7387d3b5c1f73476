// Seed 003: phase workflow definitions.
import { defineEntity, p } from '@mikro-orm/core';

/** Workflow versions are insert-only: the database refuses updates and deletes. */
export const WorkflowRow = defineEntity({
  name: 'WorkflowRow',
  tableName: 'workflows',
  triggers: [{ name: 'workflows_immutable', timing: 'before', events: ['update', 'delete'], body: "RAISE EXCEPTION 'workflow versions are immutable' USING ERRCODE = 'check_violation';" }],
  properties: {
    /** `*` for the platform's (the workflows/ folder), seen by every tenant. */
    tenantId: p.string().length(64).primary(),
    workflowId: p.string().length(128).primary(),
    version: p.string().length(32).primary(),
    definition: p.json<Record<string, unknown>>(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
