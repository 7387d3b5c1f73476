// Built-in server tools (seed 002 BaseTool): they run inside ABC and cannot reach
// the engine, agents or policy: they see only their input.
import type { PermissionLevel } from '../domain/policy.js';

export interface BuiltinTool {
  name: string;
  version: string;
  description: string;
  inputSchema: Record<string, unknown>;
  outputSchema: Record<string, unknown>;
  timeoutMs: number;
  permissionLevel: PermissionLevel;
  sideEffect: boolean;
  execute(input: Record<string, any>, signal: AbortSignal): Promise<unknown>;
}

export const BUILTIN_TOOLS: BuiltinTool[] = [
  {
    name: 'echo',
    version: '1.0.0',
    description: 'Returns its input unchanged; useful to test a pipeline.',
    inputSchema: { type: 'object' },
    outputSchema: { type: 'object' },
    timeoutMs: 1000,
    permissionLevel: 'PUBLIC',
    sideEffect: false,
    execute: async (input) => input,
  },
  {
    name: 'time.now',
    version: '1.0.0',
    description: 'The current time, as an ISO-8601 string in a time zone, and epoch milliseconds.',
    inputSchema: { type: 'object', additionalProperties: false, properties: { timezone: { type: 'string', default: 'UTC' } } },
    outputSchema: { type: 'object', required: ['iso', 'epoch_ms', 'timezone'], properties: { iso: { type: 'string' }, epoch_ms: { type: 'integer' }, timezone: { type: 'string' } } },
    timeoutMs: 1000,
    permissionLevel: 'PUBLIC',
    sideEffect: false,
    execute: async (input) => {
      const timezone = typeof input.timezone === 'string' ? input.timezone : 'UTC';
      const now = new Date();
      const parts = new Intl.DateTimeFormat('sv-SE', { timeZone: timezone, dateStyle: 'short', timeStyle: 'medium' }).format(now);
      return { iso: `${parts.replace(' ', 'T')}`, epoch_ms: now.getTime(), timezone };
    },
  },
];
