// The built-in agent port: agents that run inside ABC (a phase workflow's
// executor) instead of behind POST /invoke. A run of one is a run like any
// other: the same machine, event log, frames, cancel and recovery; only the
// stream of agent events comes from here.

/** What an agent streams back, over SSE or in-process (seed 001 §6). */
export type AgentEvent =
  | { type: 'delta'; text: string }
  | { type: 'state'; state: string; detail: Record<string, unknown> }
  /** `detail` is kept on the run's `run_done` event and its IM `done` frame; `metadata` on the stored assistant message. */
  | { type: 'done'; usage: Record<string, unknown>; finalMessage?: string; detail?: Record<string, unknown>; metadata?: Record<string, unknown> }
  | { type: 'error'; code: string; message: string };

export interface BuiltinInvocation {
  tenantId: string;
  sessionId: string;
  runId: string;
  agentId: string;
  userId: string | null;
  /** This turn's user message. */
  input: string;
  signal: AbortSignal;
  /** Set when the run is resumed after its core stopped: what clients already have of the reply. */
  alreadySent: string;
}

export interface BuiltinAgents {
  /** Whether this agent id is served in-process (`workflow:<id>`). */
  serves(agentId: string): boolean;
  /** Throws `agent_error` (unknown) before a run is created, as an unregistered agent does. */
  check(tenantId: string, agentId: string): Promise<void>;
  invoke(inv: BuiltinInvocation): AsyncIterable<AgentEvent>;
}
