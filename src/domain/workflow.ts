// Phase workflows (seed 003), as data: phases, each with its model, prompt,
// tools, stages, limits, completion and next-phase rules, carryover, fallback
// texts and GenUI rules, and a transition table that is a state machine of
// the kind every other machine is. Pure: the schema, the checks, the machine
// and the additive rule between versions.
import { badPattern, CONDITION_SCHEMA, type Condition } from './conditions.js';
import { defineMachine, type Machine } from './machine.js';
import { parseTemplate } from './template.js';

/** What fires a phase change: the phase's handler completing, a client's route, or the boundary check at a turn's start. */
export type TransitionTrigger = 'handler_completed' | 'route' | 'boundary';
export const TRANSITION_TRIGGERS: readonly TransitionTrigger[] = ['handler_completed', 'route', 'boundary'];

/** Conditions on a phase's state, by dotted path; all must hold. */
export type StateConditions = Record<string, Condition>;

export interface TransitionDef {
  from: string;
  to: string;
  trigger: TransitionTrigger;
  /** Conditions on the `from` phase's state that must hold. */
  guard?: StateConditions;
}

export interface PhaseDef {
  id: string;
  description?: string;
  /** The model; ABC's LLM_MODEL when absent. */
  model?: string;
  instructions: string;
  /** The tools offered to the model; a call to any other is refused at the tool call too. */
  tools?: { allowed: string[]; tool_choice?: 'auto' | 'none' | 'required' | { name: string } };
  /** The phase's stages: the first whose `when` holds on the phase state is current (one without `when` always holds). */
  stages?: { id: string; when?: StateConditions; instructions?: string }[];
  /** Turns in this phase before the turn-limit fallback. */
  max_turns?: number;
  /** State paths the phase must fill before it completes. */
  required_fields?: string[];
  /** Completion: every required field present, and these conditions. */
  completion?: { when?: StateConditions };
  /** Where a completed phase goes: the first rule whose `when` holds. */
  next_phase?: { to: string; when?: StateConditions; reason?: string }[];
  /** The block given to the next phase's first turn; a template over {from, to, reason, state}. */
  carryover?: { template: string };
  fallbacks?: { empty_reply?: string; stream_error?: string; turn_limit?: string; missing_fields?: string };
  /** GenUI: the payload types this phase may show, and payloads built from tool results. */
  genui?: { allowed_types?: string[]; from_tools?: { tool: string; type: string }[] };
  /** A hard deadline on the whole model stream of a turn. */
  stream_timeout_ms?: number;
  /** Who decides completion: the declarative rules above, or a registered agent over the agent protocol. */
  handler?: { kind: 'declarative' } | { kind: 'agent'; agent_id: string };
}

export interface WorkflowDefinition {
  workflow_id: string;
  version: string;
  description?: string;
  initial_phase: string;
  phases: PhaseDef[];
  transitions: TransitionDef[];
}

const ID = '^[a-z0-9][a-z0-9._-]{0,127}$';
const PHASE = '^[a-z][a-z0-9_]{0,63}$';
const conditions = { type: 'object', maxProperties: 32, additionalProperties: CONDITION_SCHEMA } as const;
const text = (max: number) => ({ type: 'string', minLength: 1, maxLength: max }) as const;

/** The JSON Schema of a definition; the checks in `workflowProblems` come after it. */
export const WORKFLOW_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['workflow_id', 'version', 'initial_phase', 'phases', 'transitions'],
  properties: {
    workflow_id: { type: 'string', pattern: ID },
    version: { type: 'string', pattern: '^\\d+\\.\\d+\\.\\d+$', maxLength: 32 },
    description: { type: 'string', maxLength: 2000 },
    initial_phase: { type: 'string', pattern: PHASE },
    phases: {
      type: 'array',
      minItems: 1,
      maxItems: 64,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'instructions'],
        properties: {
          id: { type: 'string', pattern: PHASE },
          description: { type: 'string', maxLength: 2000 },
          model: text(128),
          instructions: text(100_000),
          tools: {
            type: 'object',
            additionalProperties: false,
            required: ['allowed'],
            properties: {
              allowed: { type: 'array', maxItems: 128, uniqueItems: true, items: text(128) },
              tool_choice: {
                oneOf: [
                  { enum: ['auto', 'none', 'required'] },
                  { type: 'object', additionalProperties: false, required: ['name'], properties: { name: text(128) } },
                ],
              },
            },
          },
          stages: {
            type: 'array',
            maxItems: 32,
            items: { type: 'object', additionalProperties: false, required: ['id'], properties: { id: { type: 'string', pattern: PHASE }, when: conditions, instructions: text(100_000) } },
          },
          max_turns: { type: 'integer', minimum: 1, maximum: 1000 },
          required_fields: { type: 'array', maxItems: 64, uniqueItems: true, items: text(256) },
          completion: { type: 'object', additionalProperties: false, properties: { when: conditions } },
          next_phase: {
            type: 'array',
            maxItems: 32,
            items: { type: 'object', additionalProperties: false, required: ['to'], properties: { to: { type: 'string', pattern: PHASE }, when: conditions, reason: text(500) } },
          },
          carryover: { type: 'object', additionalProperties: false, required: ['template'], properties: { template: text(20_000) } },
          fallbacks: {
            type: 'object',
            additionalProperties: false,
            properties: { empty_reply: text(4000), stream_error: text(4000), turn_limit: text(4000), missing_fields: text(4000) },
          },
          genui: {
            type: 'object',
            additionalProperties: false,
            properties: {
              allowed_types: { type: 'array', maxItems: 64, uniqueItems: true, items: text(128) },
              from_tools: { type: 'array', maxItems: 32, items: { type: 'object', additionalProperties: false, required: ['tool', 'type'], properties: { tool: text(128), type: text(128) } } },
            },
          },
          stream_timeout_ms: { type: 'integer', minimum: 1000, maximum: 3_600_000 },
          handler: {
            oneOf: [
              { type: 'object', additionalProperties: false, required: ['kind'], properties: { kind: { const: 'declarative' } } },
              { type: 'object', additionalProperties: false, required: ['kind', 'agent_id'], properties: { kind: { const: 'agent' }, agent_id: text(128) } },
            ],
          },
        },
      },
    },
    transitions: {
      type: 'array',
      maxItems: 512,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['from', 'to', 'trigger'],
        properties: { from: { type: 'string', pattern: PHASE }, to: { type: 'string', pattern: PHASE }, trigger: { enum: TRANSITION_TRIGGERS }, guard: conditions },
      },
    },
  },
} as const;

/** A problem with a definition that its schema cannot see, and where it is. */
export interface WorkflowProblem {
  pointer: string;
  message: string;
}

/** What is wrong with a schema-valid definition: references, duplicates, templates, patterns. */
export function workflowProblems(def: WorkflowDefinition): WorkflowProblem[] {
  const problems: WorkflowProblem[] = [];
  const ids = def.phases.map((p) => p.id);
  const known = new Set(ids);
  ids.forEach((id, i) => ids.indexOf(id) !== i && problems.push({ pointer: `/phases/${i}/id`, message: `phase ${id} is defined twice` }));
  if (!known.has(def.initial_phase)) problems.push({ pointer: '/initial_phase', message: `initial_phase ${def.initial_phase} is not a phase` });
  const edges = new Set<string>();
  def.transitions.forEach((t, i) => {
    for (const end of ['from', 'to'] as const) if (!known.has(t[end])) problems.push({ pointer: `/transitions/${i}/${end}`, message: `${end} ${t[end]} is not a phase` });
    if (t.from === t.to) problems.push({ pointer: `/transitions/${i}/to`, message: `a phase does not move to itself (${t.from})` });
    const key = `${t.from}>${t.to}:${t.trigger}`;
    if (edges.has(key)) problems.push({ pointer: `/transitions/${i}`, message: `transition ${t.from} -> ${t.to} on ${t.trigger} is listed twice` });
    edges.add(key);
    const bad = badPattern(t.guard ?? {});
    if (bad) problems.push({ pointer: `/transitions/${i}/guard/${bad}/matches`, message: 'not a valid regular expression' });
  });
  def.phases.forEach((p, i) => {
    const at = `/phases/${i}`;
    p.next_phase?.forEach((n, j) => {
      if (!edges.has(`${p.id}>${n.to}:handler_completed`)) problems.push({ pointer: `${at}/next_phase/${j}/to`, message: `no handler_completed transition leads from ${p.id} to ${n.to}` });
    });
    const choice = p.tools?.tool_choice;
    if (choice && typeof choice === 'object' && !p.tools!.allowed.includes(choice.name)) problems.push({ pointer: `${at}/tools/tool_choice/name`, message: `${choice.name} is not one of the phase's allowed tools` });
    if (p.carryover) {
      try {
        parseTemplate(p.carryover.template);
      } catch (error) {
        problems.push({ pointer: `${at}/carryover/template`, message: (error as Error).message });
      }
    }
    const all = [p.completion?.when, ...(p.stages ?? []).map((s) => s.when), ...(p.next_phase ?? []).map((n) => n.when)];
    for (const c of all) {
      const bad = badPattern(c ?? {});
      if (bad) problems.push({ pointer: `${at}`, message: `${bad}.matches is not a valid regular expression` });
    }
  });
  return problems;
}

/** The machine trigger of a transition: its kind and its target (`handler_completed:stress_test`). */
export const triggerOf = (t: Pick<TransitionDef, 'trigger' | 'to'>) => `${t.trigger}:${t.to}`;

const ACTORS: Record<TransitionTrigger, string[]> = { handler_completed: ['handler'], route: ['client'], boundary: ['system'] };

/** The phase table as a machine: the same pure transition function and topology as every other machine. */
export function phaseMachine(def: WorkflowDefinition): Machine<string, string> {
  const transitions = Object.fromEntries(def.phases.map((p) => [p.id, {} as Record<string, string>]));
  const actors: Record<string, string[]> = {};
  for (const t of def.transitions) {
    transitions[t.from]![triggerOf(t)] = t.to;
    actors[triggerOf(t)] = ACTORS[t.trigger];
  }
  return defineMachine({
    name: `workflow:${def.workflow_id}@${def.version}`,
    initial: def.initial_phase,
    states: def.phases.map((p) => p.id),
    transitions,
    actors,
    // A workflow session waits in any phase for the user's next turn.
    resumable: def.phases.map((p) => p.id),
  });
}

/**
 * What a new version breaks for sessions of an older one of the same major
 * version: a phase or a transition they may stand on or take, or the initial
 * phase. Prompts, models, tools, rules and texts may change.
 */
export function workflowBreaks(before: WorkflowDefinition, next: WorkflowDefinition): string[] {
  const phases = new Set(next.phases.map((p) => p.id));
  const moves = new Set(next.transitions.map((t) => `${t.from}>${t.to}:${t.trigger}`));
  return [
    ...(before.initial_phase !== next.initial_phase ? [`initial_phase changed from ${before.initial_phase} to ${next.initial_phase}`] : []),
    ...before.phases.filter((p) => !phases.has(p.id)).map((p) => `phase ${p.id} was removed`),
    ...before.transitions.filter((t) => !moves.has(`${t.from}>${t.to}:${t.trigger}`)).map((t) => `transition ${t.from} -> ${t.to} on ${t.trigger} was removed`),
  ];
}
