// The workflow executor: a built-in agent that runs one turn of a workflow
// session as a run (seed 003 §S5, in its order). Agent id `workflow:<id>`
// (or `workflow:<id>@<version>` to pin one for a new session). It streams
// the model through the LLM proxy's path (Chat Completions: the phase's tools
// map one to one onto function tools, and every router ABC fronts speaks
// it), calls tools through the tool service, and ends every turn with a
// persisted assistant message and a `done`, whatever failed.
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError } from '../domain/errors.js';
import { canonicalHash } from '../domain/hash.js';
import { boundaryMove, carryoverOf, currentStage, decidePhase, finalToolRecords, genuiOf, missingFields, turnText, type ToolRecord } from '../domain/phase-turn.js';
import { extractPayloads, mergePatch, TagFilter } from '../domain/tagged.js';
import { phaseMachine, type PhaseDef, type WorkflowDefinition } from '../domain/workflow.js';
import type { AgentEvent, BuiltinAgents, BuiltinInvocation } from '../ports/builtin-agent.js';
import type { Logger } from '../runtime/log.js';
import type { LlmProxy } from '../orchestrator/llm-proxy.js';
import type { ToolCalls } from '../orchestrator/tool-calls.js';
import { putContext } from '../store/context-store.js';
import { findRun, type RunRow } from '../store/run-store.js';
import { listMessages } from '../store/session-store.js';
import { getTool, listTools } from '../store/tool-store.js';
import { movePhase, openWorkflowSession, readWorkflowSession, startTurn } from '../store/workflow-sessions.js';
import type { Workflows } from './registry.js';
import { phaseOf, readStates, stateKey, type PhaseStates } from './state.js';
import type { Secrets } from '../access/secrets.js';
import { invokeAgent } from '../execution/agent-client.js';
import { invocableAgent } from '../store/agent-store.js';

export const WORKFLOW_AGENT_PREFIX = 'workflow:';

/** Model rounds one turn may take (each tool round is one). */
const MAX_ROUNDS = 8;
const DEFAULT_STREAM_TIMEOUT_MS = 120_000;
/** How long a tool call of a turn may wait (an approval, a client tool) before the turn gives up on it. */
const TOOL_WAIT_MS = 24 * 3_600_000;

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

type ChatMessage = Record<string, unknown>;


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
  async refusal(run: RunRow, tool: string): Promise<string | null> {
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
    const streamed = yield* this.#stream(inv, def, phase, states, carryover, inv.alreadySent);

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
      const decided = await this.#askHandler(inv, def, phase, phase.handler.agent_id, patched, extracted.text).catch((error: Error) => error);
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

  /**
   * Streams the model for the phase, with its tools, until it answers
   * without a tool call; tagged segments never reach the live deltas. A
   * broken stream or the phase's hard deadline ends it with `error` set.
   */
  async *#stream(inv: BuiltinInvocation, def: WorkflowDefinition, phase: PhaseDef, states: PhaseStates, carryover: string | null, alreadySent: string) {
    const run = (await findRun(this.opts.em(), inv.runId))!;
    const deadline = AbortSignal.timeout(phase.stream_timeout_ms ?? DEFAULT_STREAM_TIMEOUT_MS);
    const signal = AbortSignal.any([inv.signal, deadline]);
    const tools = await this.#functionTools(inv.tenantId, phase);
    const messages = await this.#prompt(inv, def, phase, states, carryover);
    const usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
    const records: ToolRecord[] = [];
    /** Calls of each tool and arguments so far in the turn. */
    const occurrences = new Map<string, number>();
    const filter = new TagFilter();
    let text = '';
    let visible = '';
    let skip = alreadySent;
    let error: { message: string; detail: string } | null = null;
    try {
      for (let round = 0; round < MAX_ROUNDS; round++) {
        const calls: { id: string; name: string; arguments: string }[] = [];
        let finish: string | null = null;
        const body = {
          model: phase.model ?? this.opts.defaultModel,
          messages,
          stream_options: { include_usage: true },
          ...(tools.list.length && { tools: tools.list, tool_choice: toolChoice(phase) }),
        };
        for await (const data of this.opts.llm().streamForRun({ runId: run.runId, sessionId: run.sessionId, agentId: run.rootAgentId, tenantId: run.tenantId }, body, signal)) {
          const chunk = JSON.parse(data) as Chunk;
          if (chunk.error) throw new StreamBroken(chunk.error.message ?? 'the model stream broke', chunk.error.code ?? 'stream_interrupted');
          if (chunk.usage) addUsage(usage, chunk.usage);
          const choice = chunk.choices?.[0];
          if (!choice) continue;
          finish = choice.finish_reason ?? finish;
          for (const d of choice.delta?.tool_calls ?? []) {
            const c = (calls[d.index ?? 0] ??= { id: '', name: '', arguments: '' });
            c.id ||= d.id ?? '';
            c.name += d.function?.name ?? '';
            c.arguments += d.function?.arguments ?? '';
          }
          const piece = choice.delta?.content;
          if (!piece) continue;
          text += piece;
          let shown = filter.push(piece);
          if (skip) {
            // A resumed turn: clients already have this much of the reply.
            const n = Math.min(skip.length, shown.length);
            skip = skip.slice(n);
            visible += shown.slice(0, n);
            shown = shown.slice(n);
          }
          if (shown) {
            visible += shown;
            yield { type: 'delta' as const, text: shown };
          }
        }
        // The proxy ends an aborted stream quietly: a cancel, or the phase's deadline.
        if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new Error('aborted');
        if (!calls.length || finish !== 'tool_calls') break;
        messages.push({ role: 'assistant', content: null, tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) });
        for (const c of calls) {
          const record = await this.#callTool(inv, await this.#toolName(inv.tenantId, c.name, tools.names), c.arguments, occurrences, signal);
          records.push(record);
          messages.push({ role: 'tool', tool_call_id: c.id, content: JSON.stringify(record.status === 'succeeded' ? record.result ?? null : { error: record.error }) });
        }
      }
    } catch (e) {
      if (inv.signal.aborted && !deadline.aborted) throw e;
      error = deadline.aborted
        ? { message: `the model stream passed the phase's deadline of ${phase.stream_timeout_ms ?? DEFAULT_STREAM_TIMEOUT_MS} ms`, detail: 'stream_timeout' }
        : { message: e instanceof Error ? e.message : String(e), detail: e instanceof StreamBroken ? e.code : e instanceof AbcError ? e.payload.code : 'stream_error' };
      this.#log.warn({ runId: inv.runId, error }, 'the model stream of a workflow turn failed');
    }
    const tail = filter.end();
    if (tail && !error) {
      visible += tail;
      yield { type: 'delta' as const, text: tail };
    }
    return { text, visible, usage, tools: records, error };
  }

  /**
   * Asks a registered agent, over the agent protocol, whether the phase is
   * complete. It receives the phase, its state and the reply, and answers
   * `{completed, next_phase?, transition_reason?, missing_fields?, state_patch?, genui?}`
   * as JSON (its final message, or its deltas).
   */
  async #askHandler(inv: BuiltinInvocation, def: WorkflowDefinition, phase: PhaseDef, agentId: string, state: Record<string, unknown>, reply: string): Promise<HandlerAnswer> {
    const agent = await invocableAgent(this.opts.em(), inv.tenantId, agentId);
    let text = '';
    for await (const event of invokeAgent({
      endpoint: agent.endpoint,
      authToken: agent.authToken && (await this.opts.secrets.agentToken(inv.tenantId, agent.authToken)),
      signal: AbortSignal.any([inv.signal, AbortSignal.timeout(Math.max(this.opts.agentIdleTimeoutMs, 1000) * 4)]),
      idleTimeoutMs: this.opts.agentIdleTimeoutMs,
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

  /** One tool call of the turn through the tool service, as the run; waits through an approval or a client tool. */
  async #callTool(inv: BuiltinInvocation, tool: string, rawArgs: string, occurrences: Map<string, number>, signal: AbortSignal): Promise<ToolRecord> {
    const service = this.opts.tools();
    const run = (await findRun(this.opts.em(), inv.runId))!;
    const principal = { kind: 'run' as const, runId: run.runId, sessionId: run.sessionId, agentId: run.rootAgentId, tenantId: run.tenantId };
    let args: Record<string, unknown>;
    try {
      const parsed = JSON.parse(rawArgs || '{}') as unknown;
      args = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
    } catch {
      return { tool_call_id: '', tool, args_hash: canonicalHash(rawArgs), status: 'failed', error: { code: 'invalid_request', message: `the arguments of ${tool} are not JSON` } };
    }
    const hash = canonicalHash({ tool, args });
    // The n-th call of a tool with these arguments in the turn: a retry the model asks for is a new call,
    // and a turn resumed after its core stopped finds each of its calls again (an approval is asked once).
    const n = (occurrences.get(hash) ?? 0) + 1;
    occurrences.set(hash, n);
    try {
      let outcome = await service.invoke(principal, { toolName: tool, runId: run.runId, args, idempotencyKey: `${run.runId}:${hash}:${n}` });
      if (outcome.status === 'pending') outcome = service.outcome(await service.wait(outcome.toolCallId, TOOL_WAIT_MS, signal));
      return outcome.status === 'succeeded'
        ? { tool_call_id: outcome.toolCallId, tool, args_hash: hash, status: 'succeeded', result: outcome.result }
        : { tool_call_id: outcome.toolCallId, tool, args_hash: hash, status: 'failed', error: outcome.status === 'failed' ? outcome.error : { code: 'tool_failed', message: 'no outcome' } };
    } catch (error) {
      if (signal.aborted) throw error;
      const e = AbcError.from(error).payload;
      return { tool_call_id: '', tool, args_hash: hash, status: 'failed', error: { code: e.code, message: e.message } };
    }
  }

  /** The ABC tool a model's function name stands for: one the phase offers, else any the tenant sees (to refuse it by name). */
  async #toolName(tenantId: string, fn: string, offered: Map<string, string>): Promise<string> {
    return offered.get(fn) ?? (await listTools(this.opts.em(), tenantId)).find((t) => functionName(t.name) === fn)?.name ?? fn;
  }

  /** The phase's tools as OpenAI function tools; function names cannot hold dots, so each maps back to its ABC name. */
  async #functionTools(tenantId: string, phase: PhaseDef): Promise<{ list: Record<string, unknown>[]; names: Map<string, string> }> {
    const names = new Map<string, string>();
    const list: Record<string, unknown>[] = [];
    if (phase.tools?.tool_choice === 'none') return { list, names };
    for (const name of phase.tools?.allowed ?? []) {
      const tool = await getTool(this.opts.em(), tenantId, name).catch(() => undefined);
      if (!tool) continue;
      const fn = functionName(name);
      names.set(fn, name);
      list.push({ type: 'function', function: { name: fn, ...(tool.description && { description: tool.description }), parameters: tool.inputSchema ?? { type: 'object' } } });
    }
    return { list, names };
  }

  /** The messages: the phase's instructions and state, then the transcript, the carryover before this turn's message. */
  async #prompt(inv: BuiltinInvocation, def: WorkflowDefinition, phase: PhaseDef, states: PhaseStates, carryover: string | null): Promise<ChatMessage[]> {
    const state = states[phase.id] ?? {};
    const stage = currentStage(phase, state);
    const missing = missingFields(phase, state);
    const system = [
      phase.instructions,
      stage?.instructions,
      `You are in phase ${phase.id} of ${def.workflow_id}${stage ? `, stage ${stage.id}` : ''}.`,
      missing.length ? `Still needed: ${missing.join(', ')}.` : '',
      `[SESSION STATE]\n${JSON.stringify(state)}\n[/SESSION STATE]`,
      'Do not repeat the session state block in your answer.',
    ].filter(Boolean).join('\n\n');
    const transcript = (await listMessages(this.opts.em(), inv.sessionId, this.opts.transcriptLimit)).messages;
    const messages: ChatMessage[] = [{ role: 'system', content: system }];
    for (const m of transcript) {
      const own = m.runId === inv.runId && m.role === 'user';
      messages.push({ role: m.role === 'assistant' ? 'assistant' : 'user', content: own && carryover ? `${carryover}\n\n${m.content}` : m.content });
    }
    return messages;
  }
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

interface Chunk {
  choices?: { delta?: { content?: string | null; tool_calls?: { index?: number; id?: string; function?: { name?: string; arguments?: string } }[] }; finish_reason?: string | null }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number };
  error?: { message?: string; code?: string };
}

class StreamBroken extends Error {
  constructor(message: string, readonly code: string) {
    super(message);
  }
}

function addUsage(total: { prompt_tokens: number; completion_tokens: number; total_tokens: number }, u: NonNullable<Chunk['usage']>): void {
  total.prompt_tokens += u.prompt_tokens ?? 0;
  total.completion_tokens += u.completion_tokens ?? 0;
  total.total_tokens += u.total_tokens ?? (u.prompt_tokens ?? 0) + (u.completion_tokens ?? 0);
}

function parseAgent(agentId: string): { workflowId: string; version?: string } {
  const [workflowId, version] = agentId.slice(WORKFLOW_AGENT_PREFIX.length).split('@');
  return { workflowId: workflowId!, ...(version && { version }) };
}



const state = (name: string, detail: Record<string, unknown>): AgentEvent => ({ type: 'state', state: name, detail });
const phaseChange = (m: { from: string; to: string; reason: string; trigger: string }): AgentEvent => state('phase_change', m);
const functionName = (tool: string) => tool.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, 64);
const toolChoice = (phase: PhaseDef) => {
  const c = phase.tools?.tool_choice ?? 'auto';
  return typeof c === 'string' ? c : { type: 'function', function: { name: functionName(c.name) } };
};
