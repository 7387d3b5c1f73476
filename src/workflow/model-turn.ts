// The model side of a workflow turn: the prompt, the phase's tools as
// function tools, the stream through the LLM proxy's path with tagged
// segments withheld from the deltas, and the tool calls in between, through
// the tool service as the run.
import { AbcError } from '../domain/errors.js';
import { canonicalHash } from '../domain/hash.js';
import { currentStage, missingFields, type ToolRecord } from '../domain/phase-turn.js';
import { TagFilter } from '../domain/tagged.js';
import type { PhaseDef, WorkflowDefinition } from '../domain/workflow.js';
import type { BuiltinInvocation } from '../ports/builtin-agent.js';
import { findRun, type RunRow } from '../store/run-store.js';
import { listMessages } from '../store/session-store.js';
import { getTool, listTools } from '../store/tool-store.js';
import type { ExecutorOptions } from './executor.js';
import type { PhaseStates } from './state.js';

/** Model rounds one turn may take (each tool round is one). */
const MAX_ROUNDS = 8;
const DEFAULT_STREAM_TIMEOUT_MS = 120_000;
/** How long a tool call of a turn may wait (an approval, a client tool) before the turn gives up on it. */
const TOOL_WAIT_MS = 24 * 3_600_000;

type ChatMessage = Record<string, unknown>;

/**
 * Streams the model for the phase, with its tools, until it answers
 * without a tool call; tagged segments never reach the live deltas. A
 * broken stream or the phase's hard deadline ends it with `error` set.
 */
export async function* streamTurn(opts: ExecutorOptions, inv: BuiltinInvocation, def: WorkflowDefinition, phase: PhaseDef, states: PhaseStates, carryover: string | null, alreadySent: string) {
  const run = (await findRun(opts.em(), inv.runId))!;
  const deadline = AbortSignal.timeout(phase.stream_timeout_ms ?? DEFAULT_STREAM_TIMEOUT_MS);
  const signal = AbortSignal.any([inv.signal, deadline]);
  const tools = await functionTools(opts, inv.tenantId, phase);
  const messages = await prompt(opts, inv, def, phase, states, carryover);
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
        model: phase.model ?? opts.defaultModel,
        messages,
        stream_options: { include_usage: true },
        ...(tools.list.length && { tools: tools.list, tool_choice: toolChoice(phase) }),
      };
      for await (const data of opts.llm().streamForRun({ runId: run.runId, sessionId: run.sessionId, agentId: run.rootAgentId, tenantId: run.tenantId }, body, signal)) {
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
        const record = await callTool(opts, run, await toolName(opts, inv.tenantId, c.name, tools.names), c.arguments, occurrences, signal);
        records.push(record);
        messages.push({ role: 'tool', tool_call_id: c.id, content: JSON.stringify(record.status === 'succeeded' ? record.result ?? null : { error: record.error }) });
      }
    }
  } catch (e) {
    if (inv.signal.aborted && !deadline.aborted) throw e;
    error = deadline.aborted
      ? { message: `the model stream passed the phase's deadline of ${phase.stream_timeout_ms ?? DEFAULT_STREAM_TIMEOUT_MS} ms`, detail: 'stream_timeout' }
      : { message: e instanceof Error ? e.message : String(e), detail: e instanceof StreamBroken ? e.code : e instanceof AbcError ? e.payload.code : 'stream_error' };
    opts.log.warn({ runId: inv.runId, error }, 'the model stream of a workflow turn failed');
  }
  const tail = filter.end();
  if (tail && !error) {
    visible += tail;
    yield { type: 'delta' as const, text: tail };
  }
  return { text, visible, usage, tools: records, error };
}

/** One tool call of the turn through the tool service, as the run; waits through an approval or a client tool. */
async function callTool(opts: ExecutorOptions, run: RunRow, tool: string, rawArgs: string, occurrences: Map<string, number>, signal: AbortSignal): Promise<ToolRecord> {
  const service = opts.tools();
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
async function toolName(opts: ExecutorOptions, tenantId: string, fn: string, offered: Map<string, string>): Promise<string> {
  return offered.get(fn) ?? (await listTools(opts.em(), tenantId)).find((t) => functionName(t.name) === fn)?.name ?? fn;
}

/** The phase's tools as OpenAI function tools; function names cannot hold dots, so each maps back to its ABC name. */
async function functionTools(opts: ExecutorOptions, tenantId: string, phase: PhaseDef): Promise<{ list: Record<string, unknown>[]; names: Map<string, string> }> {
  const names = new Map<string, string>();
  const list: Record<string, unknown>[] = [];
  if (phase.tools?.tool_choice === 'none') return { list, names };
  for (const name of phase.tools?.allowed ?? []) {
    const tool = await getTool(opts.em(), tenantId, name).catch(() => undefined);
    if (!tool) continue;
    const fn = functionName(name);
    names.set(fn, name);
    list.push({ type: 'function', function: { name: fn, ...(tool.description && { description: tool.description }), parameters: tool.inputSchema ?? { type: 'object' } } });
  }
  return { list, names };
}

/** The messages: the phase's instructions and state, then the transcript, the carryover before this turn's message. */
async function prompt(opts: ExecutorOptions, inv: BuiltinInvocation, def: WorkflowDefinition, phase: PhaseDef, states: PhaseStates, carryover: string | null): Promise<ChatMessage[]> {
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
  const transcript = (await listMessages(opts.em(), inv.sessionId, opts.transcriptLimit)).messages;
  const messages: ChatMessage[] = [{ role: 'system', content: system }];
  for (const m of transcript) {
    const own = m.runId === inv.runId && m.role === 'user';
    messages.push({ role: m.role === 'assistant' ? 'assistant' : 'user', content: own && carryover ? `${carryover}\n\n${m.content}` : m.content });
  }
  return messages;
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

const functionName = (tool: string) => tool.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, 64);
const toolChoice = (phase: PhaseDef) => {
  const c = phase.tools?.tool_choice ?? 'auto';
  return typeof c === 'string' ? c : { type: 'function', function: { name: functionName(c.name) } };
};
