// A registered tool (seed 001 §7.2, seed 002 BaseTool): its kind, schemas, limits and policy facts.
import type { PermissionLevel } from './policy.js';

export type ToolKind = 'builtin' | 'http' | 'client';

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
