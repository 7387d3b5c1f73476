// The assembly pack port: what a business pack (seed 000's "mojo") gives the
// engine. A pack brings execution units (the capabilities its plan steps call),
// the output of the assemblies it owns (aggregate, partial result, render), its
// own tables, and CLI commands. Packs live outside src/ and import only ports
// and the domain; the composition root loads them.
import type OpenAI from 'openai';
import type { PermissionLevel } from '../domain/policy.js';
import type { ToolKindAdapter } from './tool-kind.js';

/** What the policy and the reviewer know of a unit, as of any tool (seed 002 BaseTool). */
export interface UnitMeta {
  version: string;
  permission_level: PermissionLevel;
  side_effect: boolean;
  timeout_ms: number;
  output_schema: Record<string, unknown>;
}

/** SQL for a pack's own tables; `?` placeholders. */
export interface PackDb {
  query<T extends object = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  /** Runs `work` in one transaction. */
  transaction<T>(work: (db: PackDb) => Promise<T>): Promise<T>;
}

/** An LLM reached through ABC's proxy path: its retries, fallbacks, accounting and the tenant's policy apply. */
export interface LlmAccess {
  model: string;
  /** An `openai` client whose calls go through the proxy; `onCall` receives each call's record. */
  client(onCall?: (record: Record<string, unknown>) => void, options?: { maxRetries?: number; timeoutMs?: number }): OpenAI;
}

/** The LLM as the engine holds it: a ticket's calls are its tenant's, under its policy and token budgets. */
export interface TenantLlm {
  model: string;
  forTenant(tenantId: string): LlmAccess;
}

export interface UnitContext {
  /** The step's input, as the plan bound it. */
  input: Record<string, unknown>;
  /** Outputs of the step's ancestors, by step id (absent when skipped). */
  deps: Record<string, unknown>;
  db: PackDb;
  llm?: LlmAccess;
  /** Receives the record of each LLM call the unit makes. */
  onLlmCall?: (record: Record<string, unknown>) => void;
  signal: AbortSignal;
  /** The plan's constraints on the capability (assembly `capabilities[].constraints`), e.g. an LLM's max_tokens. */
  constraints?: Record<string, unknown>;
}

/** One capability served in-process. A capability named `llm.*` is granted only when an LLM router is configured. */
export interface ExecutionUnit {
  meta: UnitMeta;
  run(ctx: UnitContext): Promise<unknown>;
}

export interface Packaged {
  result: Record<string, unknown>;
  warnings: string[];
}

export interface Artifact {
  content: string;
  mediaType: string;
}

/** How an assembly's step outputs (by step id) become the contract's result, a poller's partial result, and the artifact. */
export interface AssemblyOutput {
  aggregate(request: Record<string, unknown>, outputs: Record<string, unknown>): Packaged;
  partialResult(request: Record<string, unknown>, outputs: Record<string, unknown>): Record<string, unknown> | null;
  render(request: Record<string, unknown>, result: Record<string, unknown>, outputs: Record<string, unknown>): Artifact;
}

export interface PackMigration {
  /** Unique within the pack; applied once, in array order. */
  name: string;
  sql: string[];
}

/** A CLI command: `abc <name> ARGS…`. Resolves to the text printed on success. */
export interface PackCommand {
  usage: string;
  run(args: string[], db: PackDb): Promise<string>;
}

export interface AssemblyPack {
  name: string;
  /** Folders of contract schemas (`<group>/<name>/<version>/`) and assemblies (`<intent>/<version>.json`) this pack ships. */
  contractsDir?: string;
  assembliesDir?: string;
  units: Record<string, ExecutionUnit>;
  /** Outputs of the assemblies this pack owns, by assembly_id. */
  outputs?: Record<string, AssemblyOutput>;
  migrations?: PackMigration[];
  commands?: Record<string, PackCommand>;
  /** Kinds of tool the pack teaches ABC (an MCP or A2A bridge, say); tools of these kinds register like any other. */
  toolKinds?: ToolKindAdapter[];
}
