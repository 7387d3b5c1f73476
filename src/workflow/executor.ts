// The workflow executor: a built-in agent that runs one turn of a workflow
// session as a run (seed 003 §S5, in its order). Agent id `workflow:<id>`
// (or `workflow:<id>@<version>` to pin one for a new session). It streams
// the model through the LLM proxy's path (Chat Completions: the phase's tools
// map one to one onto function tools, and every router ABC fronts speaks
// it), calls tools through the tool service, and ends every turn with a
// persisted assistant message and a `done`, whatever failed.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Secrets } from '../access/secrets.js';
import { AbcError } from '../domain/errors.js';
import { boundaryMove, carryoverOf, currentStage, decidePhase, finalToolRecords, genuiOf, missingFields, turnText } from '../domain/phase-turn.js';
import { extractPayloads, mergePatch } from '../domain/tagged.js';
import { phaseMachine } from '../domain/workflow.js';
import type { LlmProxy } from '../orchestrator/llm-proxy.js';
import type { ToolCalls } from '../orchestrator/tool-calls.js';
import type { AgentEvent, BuiltinAgents, BuiltinInvocation } from '../ports/builtin-agent.js';
import type { Logger } from '../runtime/log.js';
import { putContext } from '../store/context-store.js';
import type { RunRow } from '../store/run-store.js';
import { movePhase, openWorkflowSession, readWorkflowSession, startTurn } from '../store/workflow-sessions.js';
import { askHandler } from './handler-agent.js';
import { streamTurn } from './model-turn.js';
import type { Workflows } from './registry.js';
import { phaseOf, readStates, stateKey } from './state.js';

export const WORKFLOW_AGENT_PREFIX = 'workflow:';

export interface ExecutorOptions {
  em: () => EntityManager;
  workflows: Workflows;
  llm: () => LlmProxy;
  tools: () => ToolCalls;
  /** The model of a phase that names none. */
  defaultModel: string;
  /** Messages of the transcript sent to the model. */
  transcriptLimit: number;
  /** Opens a handler agent's token. */
  secrets: Secrets;
  /** How long a handler agent may stay silent. */
  agentIdleTimeoutMs: number;
  log: Logger;
}

export class WorkflowExecutor implements BuiltinAgents {
  readonly #log: Logger;

  constructor(readonly opts: ExecutorOptions) {
    this.#log = opts.log.child({ component: 'workflow' });
  }

  serves(agentId: string): boolean {
    return agentId.startsWith(WORKFLOW_AGENT_PREFIX);
  }

  async check(tenantId: string, agentId: string): Promise<void> {
    const { workflowId, version } = parseAgent(agentId);
    try {
      await this.opts.workflows.get(tenantId, workflowId, version);
    } catch (error) {
      if (error instanceof AbcError && error.payload.code === 'WORKFLOW_NOT_FOUND') {
        throw new AbcError('NOT_FOUND', { code: 'agent_error', category: 'EXECUTION', message: error.payload.message, details: { reason: 'unknown_agent', agent_id: agentId } });
      }
      throw error;
    }
  }

  /**
   * The refusal of a tool the run's phase does not offer, or null. A tool
   * call of a workflow turn is refused at the tool service too, not only left
   * out of what the model sees: the run knows its phase.
   */
  async refusal(run: Pick<RunRow, 'rootAgentId' | 'sessionId' | 'tenantId'>, tool: string): Promise<string | null> {
    if (!this.serves(run.rootAgentId)) return null;
    const session = await readWorkflowSession(this.opts.em(), run.sessionId);
    if (!session) return null;
    const def = (await this.opts.workflows.get(run.tenantId, session.workflow_id, session.workflow_version)).definition;
    const allowed = phaseOf(def, session.phase).tools?.allowed ?? [];
    return allowed.includes(tool) ? null : `tool ${tool} is not allowed in phase ${session.phase} of workflow ${def.workflow_id} (allowed: ${allowed.join(', ') || 'none'})`;
  }

  async *invoke(inv: BuiltinInvocation): AsyncGenerator<AgentEvent> {
    const { workflowId, version } = parseAgent(inv.agentId);
    const latest = (await this.opts.workflows.get(inv.tenantId, workflowId, version)).definition;
    // 1–3: resolve the session, enforce the boundary, take the carryover and count the turn, in one transaction.
    const start = await this.opts.em().transactional(async (tx) => {
      const session = await openWorkflowSession(tx, { sessionId: inv.sessionId, tenantId: inv.tenantId, workflowId, version: latest.version, initialPhase: latest.initial_phase });
      const def = session.workflow_version === latest.version ? latest : (await this.opts.workflows.get(inv.tenantId, workflowId, session.workflow_version)).definition;
      const states = await readStates(tx, inv.tenantId, inv.sessionId, def);
      let phase = session.phase;
      const moves: { from: string; to: string; reason: string; trigger: string }[] = [];
      const boundary = boundaryMove(def, phase, states[phase] ?? {});
      if (boundary) {
        const carryover = carryoverOf(phaseOf(def, phase), { from: phase, ...boundary }, states);
        const moved = await movePhase(tx, phaseMachine(def), { sessionId: inv.sessionId, to: boundary.to, trigger: 'boundary', actor: 'system', reason: boundary.reason, carryover, runId: inv.runId });
        if (moved.ok) {
          moves.push({ from: phase, to: boundary.to, reason: boundary.reason, trigger: 'boundary' });
          phase = boundary.to;
        }
      }
      const { turn, carryover } = await startTurn(tx, inv.sessionId, inv.runId);
      return { def, states, phase, moves, carryover, turn };
    });
    const { def, states, moves, carryover, turn } = start;
    let phase = phaseOf(def, start.phase);
    for (const m of moves) yield phaseChange(m);
    const stage = currentStage(phase, states[phase.id] ?? {});
    yield state('stream_start', { session_id: inv.sessionId, workflow_id: def.workflow_id, version: def.version, phase: phase.id, stage: stage?.id ?? null, turn });

    // 4–5: prepare the prompt and tools, then stream the model, tools in between.
    const streamed = yield* streamTurn(this.opts, inv, def, phase, states, carryover, inv.alreadySent);

    // 6: post-process: payloads, state, the handler, the phase move.
    const extracted = extractPayloads(streamed.text);
    for (const d of extracted.dropped) this.#log.warn({ runId: inv.runId, tag: d.tag, reason: d.reason }, 'a tagged payload was dropped');
    // A handler agent decides on the patched state, and may patch it further.
    let patches = extracted.patches;
    let patched = patches.reduce(mergePatch, states[phase.id] ?? {});
    let outcome = decidePhase(def, phase, patched);
    let genui = extracted.genui;
    let handlerError: string | null = null;
    if (phase.handler?.kind === 'agent') {
      const decided = await askHandler(this.opts, inv, def, phase, phase.handler.agent_id, patched, extracted.text).catch((error: Error) => error);
      if (decided instanceof Error) {
        handlerError = decided.message;
        this.#log.warn({ runId: inv.runId, err: decided }, 'the phase handler agent failed; the phase stays');
        outcome = { completed: false, missing: outcome.missing };
      } else {
        if (decided.state_patch) patches = [...patches, decided.state_patch];
        patched = patches.reduce(mergePatch, states[phase.id] ?? {});
        genui = [...genui, ...(decided.genui ?? [])];
        const next = decided.completed && decided.next_phase ? { to: decided.next_phase, reason: decided.transition_reason ?? `${phase.id} completed` } : undefined;
        outcome = { completed: decided.completed, missing: decided.missing_fields ?? missingFields(phase, patched), ...(next && { next }) };
      }
    }
    if (patches.length) {
      await this.opts.em().transactional((tx) => putContext(tx, { tenantId: inv.tenantId, contextKey: stateKey(inv.sessionId), ownerType: 'session', ownerId: inv.sessionId, data: { ...states, [phase.id]: patched } }));
      states[phase.id] = patched;
      yield state('state_patch', { phase: phase.id, patches, state: patched });
    }
    const { shown, dropped } = genuiOf(phase, genui, streamed.tools.map((t) => ({ tool: t.tool, ok: t.status === 'succeeded', result: t.result })));
    for (const d of dropped) this.#log.info({ runId: inv.runId, reason: d.reason }, 'a GenUI payload was not shown');
    const ending = turnText(phase, { text: extracted.text, streamError: streamed.error !== null, turn, completed: outcome.completed, missing: outcome.missing });
    let change: { from: string; to: string; reason: string; trigger: string } | undefined;
    if (outcome.next) {
      const move = { from: phase.id, to: outcome.next.to, reason: outcome.next.reason };
      const carry = carryoverOf(phase, move, states);
      const moved = await this.opts.em().transactional((tx) =>
        movePhase(tx, phaseMachine(def), { sessionId: inv.sessionId, to: move.to, trigger: 'handler_completed', actor: 'handler', reason: move.reason, carryover: carry, runId: inv.runId, metadata: { missing_fields: [] } }),
      );
      if (moved.ok) change = { ...move, trigger: 'handler_completed' };
      else {
        // Refused, and recorded as refused: the session stays in its phase.
        handlerError ??= moved.error.payload.message;
        this.#log.warn({ runId: inv.runId, err: moved.error }, 'the phase move was refused');
      }
    }

    // 7: the tail: GenUI, the phase change, text not yet streamed, then done.
    for (const g of shown) yield state('genui', g);
    if (change) {
      yield phaseChange(change);
      phase = phaseOf(def, change.to);
    }
    // A final delta only for text not streamed: the fallback.
    if (ending.added) yield { type: 'delta', text: streamed.visible.trim() ? `\n\n${ending.added}` : ending.added };
    const status = streamed.error ? 'stream_error' : change ? 'phase_completed' : outcome.next ? 'move_refused' : outcome.completed ? 'completed' : ending.fallback === 'turn_limit' ? 'turn_limit' : 'in_progress';
    yield {
      type: 'done',
      usage: streamed.usage,
      finalMessage: ending.text,
      detail: {
        workflow_id: def.workflow_id,
        version: def.version,
        phase: phase.id,
        status,
        missing_fields: change ? missingFields(phase, states[phase.id] ?? {}) : outcome.missing,
        stream_error: streamed.error,
        ...(ending.fallback && { fallback: ending.fallback }),
        ...(handlerError && { handler_error: handlerError }),
      },
      metadata: { workflow_id: def.workflow_id, phase: change?.from ?? phase.id, tool_calls: finalToolRecords(streamed.tools), usage: streamed.usage },
    };
  }
}

function parseAgent(agentId: string): { workflowId: string; version?: string } {
  const [workflowId, version] = agentId.slice(WORKFLOW_AGENT_PREFIX.length).split('@');
  return { workflowId: workflowId!, ...(version && { version }) };
}

const state = (name: string, detail: Record<string, unknown>): AgentEvent => ({ type: 'state', state: name, detail });
const phaseChange = (m: { from: string; to: string; reason: string; trigger: string }): AgentEvent => state('phase_change', m);
