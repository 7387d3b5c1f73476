// The tools table: its one writer and its reads. Definitions are checked by the registry (orchestrator/tool-registry.ts).
import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../domain/errors.js';
import type { PermissionLevel } from '../domain/policy.js';
import type { ToolKind, ToolRow } from '../domain/tool.js';

export type { ToolKind, ToolRow };

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

/** Creates or replaces a tool. */
export async function writeTool(em: EntityManager, tool: ToolRow): Promise<ToolRow> {
  const [row] = await em.execute<RawTool[]>(
    `INSERT INTO tools (tool_name, kind, version, description, input_schema, output_schema, timeout_ms, permission_level, side_effect, endpoint, metadata)
     VALUES (?, ?, ?, ?, ?::jsonb, ?::jsonb, ?, ?, ?, ?, ?::jsonb)
     ON CONFLICT (tool_name) DO UPDATE SET kind = EXCLUDED.kind, version = EXCLUDED.version, description = EXCLUDED.description,
       input_schema = EXCLUDED.input_schema, output_schema = EXCLUDED.output_schema, timeout_ms = EXCLUDED.timeout_ms,
       permission_level = EXCLUDED.permission_level, side_effect = EXCLUDED.side_effect, endpoint = EXCLUDED.endpoint, metadata = EXCLUDED.metadata
     RETURNING *`,
    [
      tool.name, tool.kind, tool.version, tool.description, json(tool.inputSchema), json(tool.outputSchema), tool.timeoutMs,
      tool.permissionLevel, tool.sideEffect, tool.endpoint, json(tool.metadata),
    ],
  );
  return toTool(row!);
}

const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));

export async function listTools(em: EntityManager): Promise<ToolRow[]> {
  return (await em.execute<RawTool[]>('SELECT * FROM tools ORDER BY tool_name')).map(toTool);
}

export async function getTool(em: EntityManager, name: string): Promise<ToolRow> {
  const [row] = await em.execute<RawTool[]>('SELECT * FROM tools WHERE tool_name = ?', [name]);
  if (!row) throw notFound('tool', name);
  return toTool(row);
}

/** Which of `names` are registered tools with side effects. */
export async function toolsWithSideEffects(em: EntityManager, names: string[]): Promise<string[]> {
  const rows = await em.execute<{ tool_name: string }[]>('SELECT tool_name FROM tools WHERE side_effect AND tool_name IN (SELECT jsonb_array_elements_text(?::jsonb))', [JSON.stringify(names)]);
  return rows.map((r) => r.tool_name);
}
