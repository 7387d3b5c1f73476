// A phase's handler agent (`handler: {kind: agent, agent_id}`): asked over
// the agent protocol whether the phase is complete, and where it goes.
import type { PhaseDef, WorkflowDefinition } from '../domain/workflow.js';
import { missingFields } from '../domain/phase-turn.js';
import { invokeAgent } from '../execution/agent-client.js';
import type { BuiltinInvocation } from '../ports/builtin-agent.js';
import { invocableAgent } from '../store/agent-store.js';
import type { ExecutorOptions } from './executor.js';

/**
 * Asks a registered agent, over the agent protocol, whether the phase is
 * complete. It receives the phase, its state and the reply, and answers
 * `{completed, next_phase?, transition_reason?, missing_fields?, state_patch?, genui?}`
 * as JSON (its final message, or its deltas).
 */
export async function askHandler(opts: ExecutorOptions, inv: BuiltinInvocation, def: WorkflowDefinition, phase: PhaseDef, agentId: string, state: Record<string, unknown>, reply: string): Promise<HandlerAnswer> {
  const agent = await invocableAgent(opts.em(), inv.tenantId, agentId);
  let text = '';
  for await (const event of invokeAgent({
    endpoint: agent.endpoint,
    authToken: agent.authToken && (await opts.secrets.agentToken(inv.tenantId, agent.authToken)),
    signal: AbortSignal.any([inv.signal, AbortSignal.timeout(Math.max(opts.agentIdleTimeoutMs, 1000) * 4)]),
    idleTimeoutMs: opts.agentIdleTimeoutMs,
    headers: { 'x-abc-workflow': def.workflow_id, 'x-abc-phase': phase.id, 'x-session-id': inv.sessionId, 'x-run-id': inv.runId },
    body: {
      agent_id: agent.agentId,
      session_id: inv.sessionId,
      run_id: inv.runId,
      input_message: { role: 'user', content: JSON.stringify({ workflow_id: def.workflow_id, version: def.version, phase: phase.id, state, reply, missing_fields: missingFields(phase, state) }) },
      messages: [],
      context: { workflow_handler: true, reply_format: HANDLER_REPLY },
    },
  })) {
    if (event.type === 'delta') text += event.text;
    if (event.type === 'done' && event.finalMessage) text = event.finalMessage;
    if (event.type === 'error') throw new Error(`handler agent ${agentId}: ${event.message}`);
  }
  return parseHandlerAnswer(text, agentId);
}

/** What a phase's handler agent answers. */
export interface HandlerAnswer {
  completed: boolean;
  next_phase?: string;
  transition_reason?: string;
  missing_fields?: string[];
  state_patch?: Record<string, unknown>;
  genui?: Record<string, unknown>[];
}

const HANDLER_REPLY = 'Answer with one JSON object: {"completed": boolean, "next_phase"?: string, "transition_reason"?: string, "missing_fields"?: string[], "state_patch"?: object, "genui"?: object[]}.';

function parseHandlerAnswer(text: string, agentId: string): HandlerAnswer {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`handler agent ${agentId} did not answer JSON`);
  }
  const a = value as HandlerAnswer;
  const isObject = (v: unknown) => Boolean(v) && typeof v === 'object' && !Array.isArray(v);
  const ok =
    isObject(a) &&
    typeof a.completed === 'boolean' &&
    (a.next_phase === undefined || typeof a.next_phase === 'string') &&
    (a.transition_reason === undefined || typeof a.transition_reason === 'string') &&
    (a.missing_fields === undefined || (Array.isArray(a.missing_fields) && a.missing_fields.every((f) => typeof f === 'string'))) &&
    (a.state_patch === undefined || isObject(a.state_patch)) &&
    (a.genui === undefined || (Array.isArray(a.genui) && a.genui.every(isObject)));
  if (!ok) throw new Error(`handler agent ${agentId} answered ${text.slice(0, 200)}, not ${HANDLER_REPLY}`);
  return a;
}
