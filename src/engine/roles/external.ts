// Roles filled from outside ABC's code: an LLM through ABC's own proxy path
// (the `openai` SDK), or a registered agent over POST /invoke. Both read the
// frozen state as JSON and answer an AgentOutput as JSON; neither writes.
import type { Secrets } from '../../access/secrets.js';
import type OpenAI from 'openai';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError } from '../../domain/errors.js';
import type { AgentOutput, AgentRole, GlobalState, StepContext } from '../../domain/engine-types.js';
import { invokeAgent } from '../../execution/agent-client.js';
import type { LlmAccess } from '../../ports/pack.js';
import { invocableAgent } from '../../store/agent-store.js';
import { asAgentOutput, validAgentOutput, type CognitiveAgent, type EngineContextView } from './agent.js';

const ROLE_BRIEF: Record<AgentRole, string> = {
  CONTEXT_BUILDER: 'You gather what the plan needs to know. data may hold {"avoid": [capabilities to avoid]}.',
  PLANNER: 'You plan. "proposal" is the compiled plan; data may hold {"steps": [...]} re-ordering or trimming its steps, using only the whitelisted capabilities.',
  PLAN_CRITIC: 'You critique the plan in current_plan: is it sound for the goal? Answer success false with errors when it is not.',
  STEP_EXECUTOR: 'You bind a step to its call. "proposal" is {capability, input}; data may hold a corrected {capability, input} for the same step.',
  REVIEWER: 'You review. With step_context, judge the step output; without it, judge result_candidate against the goal. Set confidence honestly.',
};

const REPLY =
  'Reply with one JSON object and nothing else: {"success": boolean, "confidence": number between 0 and 1, "data": optional, "errors": optional [{"code", "message", "severity", "retryable", "suggested_action"}]}.';

/** The state an external role sees: the frozen views, without request internals it has no use for. */
const payload = (global: GlobalState, context: EngineContextView, step?: StepContext) => ({ global_state: global, execution_context: context, ...(step && { step_context: step }) });

function parseOutput(text: string, role: AgentRole, who: string): AgentOutput {
  let value: unknown;
  try {
    value = JSON.parse(text.trim().replace(/^```(?:json)?\s*|\s*```$/g, ''));
  } catch {
    throw new AbcError('INTERNAL', { code: 'AGENT_BAD_OUTPUT', category: 'EXECUTION', message: `${who} did not answer JSON`, retryable: true });
  }
  const output = asAgentOutput(value, role);
  if (!output) throw new AbcError('INTERNAL', { code: 'AGENT_BAD_OUTPUT', category: 'EXECUTION', message: `${who} did not answer an AgentOutput`, retryable: true });
  return output;
}

export class LlmAgent implements CognitiveAgent {
  readonly name: string;
  readonly #client: OpenAI;

  constructor(
    readonly role: AgentRole,
    readonly llm: LlmAccess,
    readonly model: string,
    readonly instructions = '',
    onCall?: (record: Record<string, unknown>) => void,
  ) {
    this.name = `llm.${model}`;
    this.#client = llm.client(onCall, { maxRetries: 0, timeoutMs: 30_000 });
  }

  async run(global: GlobalState, context: EngineContextView, step?: StepContext): Promise<AgentOutput> {
    const completion = await this.#client.chat.completions.create({
      model: this.model,
      temperature: 0,
      response_format: { type: 'json_object' },
      messages: [
        { role: 'system', content: [`You are the ${this.role} of an execution engine.`, ROLE_BRIEF[this.role], this.instructions, REPLY].filter(Boolean).join(' ') },
        { role: 'user', content: JSON.stringify(payload(global, context, step)) },
      ],
    });
    return parseOutput(completion.choices[0]?.message?.content ?? '', this.role, this.name);
  }

  validateOutput(output: AgentOutput): boolean {
    return validAgentOutput(output) && output.role === this.role;
  }
}

export class RemoteAgent implements CognitiveAgent {
  readonly name: string;

  constructor(
    readonly role: AgentRole,
    readonly tenantId: string,
    readonly agentId: string,
    readonly em: () => EntityManager,
    readonly idleTimeoutMs: number,
    readonly secrets: Secrets,
  ) {
    this.name = `agent.${agentId}`;
  }

  async run(global: GlobalState, context: EngineContextView, step?: StepContext): Promise<AgentOutput> {
    const agent = await invocableAgent(this.em(), this.tenantId, this.agentId);
    let text = '';
    for await (const event of invokeAgent({
      endpoint: agent.endpoint,
      authToken: agent.authToken && (await this.secrets.agentToken(this.tenantId, agent.authToken)),
      signal: AbortSignal.timeout(Math.max(this.idleTimeoutMs, 1000) * 4),
      idleTimeoutMs: this.idleTimeoutMs,
      headers: { 'x-abc-role': this.role, 'x-abc-execution-id': global.execution_id },
      body: {
        agent_id: agent.agentId,
        session_id: global.execution_id,
        run_id: global.execution_id,
        input_message: { role: 'user', content: JSON.stringify(payload(global, context, step)) },
        messages: [],
        context: { engine_role: this.role, reply_format: REPLY },
      },
    })) {
      if (event.type === 'delta') text += event.text;
      if (event.type === 'done' && event.finalMessage) text = event.finalMessage;
      if (event.type === 'error') throw new AbcError('UNAVAILABLE', { code: 'agent_error', category: 'EXECUTION', message: `${this.name}: ${event.message}`, retryable: true });
    }
    return parseOutput(text, this.role, this.name);
  }

  validateOutput(output: AgentOutput): boolean {
    return validAgentOutput(output) && output.role === this.role;
  }
}
