// The tools table: its one writer and its reads. Definitions are checked by the registry (orchestrator/tool-registry.ts).
import type { EntityManager } from '@mikro-orm/postgresql';
import { executeOne } from './native.js';
import { notFound } from '../domain/errors.js';
import type { PermissionLevel } from '../domain/policy.js';
import type { ToolKind, ToolRow } from '../domain/tool.js';
import { PLATFORM_TENANT } from '../domain/ids.js';
import { TOOLS_CHANNEL } from './event-bus.js';

export type { ToolKind, ToolRow };

/** A tenant's view of the registry: its own tools, then the platform's under any name it has not taken. */
const VISIBLE = `SELECT DISTINCT ON (tool_name) * FROM tools WHERE tenant_id IN (?, '${PLATFORM_TENANT}')`;

interface RawTool {
  tool_name: string;
  kind: ToolKind;
  version: string;
  description: string | null;
  input_schema: Record<string, unknown> | null;
  output_schema: Record<string, unknown> | null;
  timeout_ms: number;
  permission_level: PermissionLevel;
  side_effect: boolean;
  endpoint: string | null;
  metadata: Record<string, unknown> | null;
}

const toTool = (r: RawTool): ToolRow => ({
  name: r.tool_name,
  kind: r.kind,
  version: r.version,
  description: r.description,
  inputSchema: r.input_schema,
  outputSchema: r.output_schema,
  timeoutMs: r.timeout_ms,
  permissionLevel: r.permission_level,
  sideEffect: r.side_effect,
  endpoint: r.endpoint,
  metadata: r.metadata,
});

/**
 * Creates or replaces a tool of `tenantId` (PLATFORM_TENANT for the
 * platform's), and tells every core (TOOLS_CHANNEL), whose ToolCatalog then
 * reads the tools again.
 */
export async function writeTool(em: EntityManager, tenantId: string, tool: ToolRow): Promise<ToolRow> {
  const [row] = await em.execute<RawTool[]>(
    `WITH w AS (
       INSERT INTO tools (tenant_id, tool_name, kind, version, description, input_schema, output_schema, timeout_ms, permission_level, side_effect, endpoint, metadata)
       VALUES (?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?, ?, ?, ?, ?::jsonb)
       ON CONFLICT (tenant_id, tool_name) DO UPDATE SET kind = EXCLUDED.kind, version = EXCLUDED.version, description = EXCLUDED.description,
         input_schema = EXCLUDED.input_schema, output_schema = EXCLUDED.output_schema, timeout_ms = EXCLUDED.timeout_ms,
         permission_level = EXCLUDED.permission_level, side_effect = EXCLUDED.side_effect, endpoint = EXCLUDED.endpoint, metadata = EXCLUDED.metadata
       RETURNING *)
     SELECT w.*, pg_notify('${TOOLS_CHANNEL}', w.tenant_id) AS notified FROM w`,
    [
      tenantId, tool.name, tool.kind, tool.version, tool.description, json(tool.inputSchema), json(tool.outputSchema), tool.timeoutMs,
      tool.permissionLevel, tool.sideEffect, tool.endpoint, json(tool.metadata),
    ],
  );
  return toTool(row!);
}

const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));

/** Own tools shadow platform ones of the same name. */
const OWN_FIRST = `ORDER BY tool_name, tenant_id = '${PLATFORM_TENANT}'`;

export async function listTools(em: EntityManager, tenantId: string): Promise<ToolRow[]> {
  return (await executeOne<RawTool>(em, `${VISIBLE} ${OWN_FIRST}`, [tenantId])).map(toTool);
}

export async function getTool(em: EntityManager, tenantId: string, name: string): Promise<ToolRow> {
  const [row] = await executeOne<RawTool>(em, `${VISIBLE} AND tool_name = ? ${OWN_FIRST}`, [tenantId, name]);
  if (!row) throw notFound('tool', name);
  return toTool(row);
}

/** Which of `names` are tools the tenant sees with side effects. */
export async function toolsWithSideEffects(em: EntityManager, tenantId: string, names: string[]): Promise<string[]> {
  const rows = await em.execute<RawTool[]>(`${VISIBLE} AND tool_name IN (SELECT jsonb_array_elements_text(?::jsonb)) ${OWN_FIRST}`, [tenantId, JSON.stringify(names)]);
  return rows.filter((r) => r.side_effect).map((r) => r.tool_name);
}
