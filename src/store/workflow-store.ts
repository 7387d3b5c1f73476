// The workflows table (seed 003 definitions), insert-only: a trigger refuses
// updates and deletes. Each version is the platform's (`*`) or one tenant's;
// a tenant sees the platform's and its own.
import type { EntityManager } from '@mikro-orm/postgresql';
import { PLATFORM_TENANT } from '../domain/ids.js';
import type { WorkflowDefinition } from '../domain/workflow.js';

const VISIBLE = `tenant_id IN (?, '${PLATFORM_TENANT}')`;
const SEMVER_ORDER = "string_to_array(version, '.')::int[]";

export interface StoredWorkflow {
  tenant_id: string;
  definition: WorkflowDefinition;
}

/** Inserts a version; false when its owner has that id and version already. */
export async function insertWorkflow(em: EntityManager, tenantId: string, def: WorkflowDefinition): Promise<boolean> {
  const rows = await em.execute<{ workflow_id: string }[]>(
    'INSERT INTO workflows (tenant_id, workflow_id, version, definition) VALUES (?, ?, ?, ?::jsonb) ON CONFLICT DO NOTHING RETURNING workflow_id',
    [tenantId, def.workflow_id, def.version, JSON.stringify(def)],
  );
  return rows.length > 0;
}

/** The versions of one workflow the tenant sees, oldest first; its own before the platform's at the same version. */
export async function workflowVersions(em: EntityManager, tenantId: string, workflowId: string): Promise<StoredWorkflow[]> {
  return em.execute<StoredWorkflow[]>(
    `SELECT tenant_id, definition FROM workflows WHERE ${VISIBLE} AND workflow_id = ? ORDER BY ${SEMVER_ORDER}, tenant_id = '${PLATFORM_TENANT}'`,
    [tenantId, workflowId],
  );
}

/** Every version the tenant sees, by id then version. */
export async function listWorkflows(em: EntityManager, tenantId: string): Promise<StoredWorkflow[]> {
  return em.execute<StoredWorkflow[]>(`SELECT tenant_id, definition FROM workflows WHERE ${VISIBLE} ORDER BY workflow_id, ${SEMVER_ORDER}, tenant_id = '${PLATFORM_TENANT}'`, [tenantId]);
}
