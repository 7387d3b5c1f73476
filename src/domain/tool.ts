// A registered tool (seed 001 §7.2, seed 002 BaseTool): its kind, schemas, limits and policy facts.
import type { PermissionLevel } from './policy.js';

/** A tool kind's name: builtin, http and client ship with ABC; others plug in as adapters (ports/tool-kind.ts). */
export type ToolKind = string;

export interface ToolRow {
  name: string;
  kind: ToolKind;
  version: string;
  description: string | null;
  inputSchema: Record<string, unknown> | null;
  outputSchema: Record<string, unknown> | null;
  timeoutMs: number;
  permissionLevel: PermissionLevel;
  sideEffect: boolean;
  endpoint: string | null;
  metadata: Record<string, unknown> | null;
}
