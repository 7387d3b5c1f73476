// The tool-kind port: what a kind of tool (built-in, HTTP webhook, client-side,
// and the next ones: MCP, A2A) gives ABC. Tool calls, policy, approvals, the
// engine's PEP and the registry treat every kind through this alone.
import type { ToolRow } from '../domain/tool.js';

export interface ToolInvocation {
  tool: ToolRow;
  args: Record<string, unknown>;
  toolCallId: string;
  runId: string;
  /** Aborts at the tool's timeout or when the caller gives up. */
  signal: AbortSignal;
  /** The value of a secret of the caller's tenant (`name` or `name@version`); refuses a missing or retired one. */
  secret(ref: string): Promise<string>;
  /** The W3C traceparent of the call's span, for the tool's own request. */
  traceparent?: string;
}

export interface ToolKindAdapter {
  kind: string;
  /** Runs on the caller's client: ABC sends a tool_request and waits for its tool_result. */
  clientSide: boolean;
  /** Checks a definition of this kind; throws `invalid_request` naming the field. */
  validate(tool: ToolRow): void;
  /** Runs one call on the server; a server-side kind must have it. Throws ToolFailure-like errors or anything else (a tool_failed). */
  run?(call: ToolInvocation): Promise<unknown>;
}
