// The tool registry: built-ins, the tools of ABC_TOOLS_FILE, and tools registered over the API.
import { readFile } from 'node:fs/promises';
import { Ajv } from 'ajv';
import type { EntityManager } from '@mikro-orm/postgresql';
import { invalidRequest } from '../domain/errors.js';
import type { PermissionLevel } from '../domain/policy.js';
import type { ToolKind, ToolRow } from '../domain/tool.js';
import { BUILTIN_TOOLS } from '../execution/builtin-tools.js';
import type { ToolKinds } from '../execution/tool-kinds.js';
import { writeTool } from '../store/tool-store.js';
import { PLATFORM_TENANT } from '../domain/ids.js';

const schemaCompiler = new Ajv({ strict: false });

/** Checks a tool definition; the error names the field. */
export function checkTool(tool: ToolRow, kinds: ToolKinds): void {
  if (!/^[A-Za-z0-9._-]{1,128}$/.test(tool.name)) throw invalidRequest('name must be 1-128 of A-Z a-z 0-9 . _ -', 'name');
  kinds.validate(tool);
  if (!Number.isInteger(tool.timeoutMs) || tool.timeoutMs <= 0) throw invalidRequest('timeout_ms must be a positive integer', 'timeout_ms');
  if (!['PUBLIC', 'INTERNAL', 'ADMIN'].includes(tool.permissionLevel)) throw invalidRequest('permission_level must be PUBLIC, INTERNAL or ADMIN', 'permission_level');
  for (const field of ['inputSchema', 'outputSchema'] as const) {
    if (!tool[field]) continue;
    try {
      schemaCompiler.compile(tool[field]);
    } catch (error) {
      throw invalidRequest(`${field === 'inputSchema' ? 'input_schema' : 'output_schema'} is not a valid JSON Schema: ${(error as Error).message}`, field === 'inputSchema' ? 'input_schema' : 'output_schema');
    }
  }
}

/** Checks and creates or replaces a tool of `tenantId`. */
export async function upsertTool(em: EntityManager, kinds: ToolKinds, tenantId: string, tool: ToolRow): Promise<ToolRow> {
  checkTool(tool, kinds);
  return writeTool(em, tenantId, tool);
}

/** Registers the built-ins and the tools of a config file (a JSON array of tool definitions), for every tenant. */
export async function bootTools(em: EntityManager, kinds: ToolKinds, file: string | undefined, defaultTimeoutMs: number): Promise<number> {
  for (const b of BUILTIN_TOOLS) {
    await upsertTool(em, kinds, PLATFORM_TENANT, {
      name: b.name, kind: 'builtin', version: b.version, description: b.description, inputSchema: b.inputSchema, outputSchema: b.outputSchema,
      timeoutMs: b.timeoutMs, permissionLevel: b.permissionLevel, sideEffect: b.sideEffect, endpoint: null, metadata: null,
    });
  }
  if (!file) return BUILTIN_TOOLS.length;
  let defs: unknown;
  try {
    defs = JSON.parse(await readFile(file, 'utf8'));
  } catch (error) {
    throw new Error(`ABC_TOOLS_FILE ${file}: ${(error as Error).message}`);
  }
  if (!Array.isArray(defs)) throw new Error(`ABC_TOOLS_FILE ${file}: expected a JSON array of tools`);
  for (const [i, d] of defs.entries()) {
    try {
      await upsertTool(em, kinds, PLATFORM_TENANT, fromJson(d as Record<string, unknown>, defaultTimeoutMs));
    } catch (error) {
      throw new Error(`ABC_TOOLS_FILE ${file}: tool #${i}: ${(error as Error).message}`);
    }
  }
  return BUILTIN_TOOLS.length + defs.length;
}

/** A tool from its JSON (snake_case) definition. */
export function fromJson(d: Record<string, unknown>, defaultTimeoutMs: number): ToolRow {
  return {
    name: String(d.name ?? ''),
    kind: (d.kind ?? 'http') as ToolKind,
    version: String(d.version ?? '1.0.0'),
    description: typeof d.description === 'string' ? d.description : null,
    inputSchema: (d.input_schema as Record<string, unknown>) ?? null,
    outputSchema: (d.output_schema as Record<string, unknown>) ?? null,
    timeoutMs: typeof d.timeout_ms === 'number' ? d.timeout_ms : defaultTimeoutMs,
    permissionLevel: (d.permission_level ?? 'PUBLIC') as PermissionLevel,
    sideEffect: d.side_effect === true,
    endpoint: typeof d.endpoint === 'string' ? d.endpoint : null,
    metadata: (d.metadata as Record<string, unknown>) ?? null,
  };
}
