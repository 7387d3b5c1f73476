// The decisions of one workflow turn, pure: which stage a phase is in, what
// it still lacks, whether it completed and where it goes, the boundary check
// at a turn's start, the fallback text a turn ends with, the GenUI payloads
// it shows, and the tool-call records its message keeps (seed 003 §S5–S10).
import { allMatch, valueAt } from './conditions.js';
import { renderTemplate } from './template.js';
import type { PhaseDef, StateConditions, WorkflowDefinition } from './workflow.js';

type State = Record<string, unknown>;

const holds = (state: State, when: StateConditions | undefined) => allMatch(state, when ?? {});
const absent = (v: unknown) => v === undefined || v === null || v === '';

/** The first stage whose conditions hold on the phase's state. */
export function currentStage(phase: PhaseDef, state: State): NonNullable<PhaseDef['stages']>[number] | undefined {
  return phase.stages?.find((s) => holds(state, s.when));
}

/** The required fields the phase's state still lacks. */
export const missingFields = (phase: PhaseDef, state: State): string[] => (phase.required_fields ?? []).filter((path) => absent(valueAt(state, path)));

export interface PhaseOutcome {
  completed: boolean;
  missing: string[];
  /** Where the completed phase goes; none when no rule (and guard) holds. */
  next?: { to: string; reason: string };
}

/**
 * The declarative handler: a phase with required fields or a completion
 * condition completes once every field is present and the condition holds
 * (a phase with neither never completes on its own). It goes to the first
 * `next_phase` rule that holds, if the table's guard for that move holds too.
 */
export function decidePhase(def: WorkflowDefinition, phase: PhaseDef, state: State): PhaseOutcome {
  const missing = missingFields(phase, state);
  const hasRule = Boolean(phase.required_fields?.length || phase.completion?.when);
  const completed = hasRule && missing.length === 0 && holds(state, phase.completion?.when);
  if (!completed) return { completed, missing };
  const rule = (phase.next_phase ?? []).find((n) => holds(state, n.when) && guardHolds(def, phase.id, n.to, 'handler_completed', state));
  return { completed, missing, ...(rule && { next: { to: rule.to, reason: rule.reason ?? `${phase.id} completed` } }) };
}

function guardHolds(def: WorkflowDefinition, from: string, to: string, trigger: string, state: State): boolean {
  const t = def.transitions.find((x) => x.from === from && x.to === to && x.trigger === trigger);
  return Boolean(t) && holds(state, t!.guard);
}

/** The boundary move at a turn's start: the first `boundary` transition out of the phase whose guard holds. */
export function boundaryMove(def: WorkflowDefinition, phase: string, state: State): { to: string; reason: string } | undefined {
  const t = def.transitions.find((x) => x.from === phase && x.trigger === 'boundary' && holds(state, x.guard));
  return t && { to: t.to, reason: `boundary: ${Object.keys(t.guard ?? {}).join(', ') || 'always'}` };
}

/** The block a phase hands the next one, from its carryover template. */
export function carryoverOf(phase: PhaseDef, move: { from: string; to: string; reason: string }, state: Record<string, State>): string | null {
  return phase.carryover ? renderTemplate(phase.carryover.template, { ...move, state }).trim() || null : null;
}

export type Fallback = 'stream_error' | 'turn_limit' | 'missing_fields' | 'empty_reply';

const DEFAULT_TEXTS: Record<Fallback, string> = {
  stream_error: 'The answer was interrupted. Please send your message again.',
  turn_limit: 'We have reached the limit of turns for this step.',
  missing_fields: 'To go on I still need: {{#each /missing_fields}}{{.}} {{/each}}',
  empty_reply: 'Sorry, I have no answer to that. Could you say it another way?',
};

/**
 * The text a turn ends with (seed 003 §S9, in its order): a broken stream
 * ends with the stream-error text after what arrived; a turn past the phase's
 * turn limit that did not complete with the turn-limit text; an empty reply
 * with the missing-fields text when fields are missing, else the empty-reply text.
 */
export function turnText(phase: PhaseDef, t: { text: string; streamError: boolean; turn: number; completed: boolean; missing: string[] }): { text: string; fallback?: Fallback; added?: string } {
  const with_ = (kind: Fallback) => {
    const added = renderTemplate(phase.fallbacks?.[kind] ?? DEFAULT_TEXTS[kind], { missing_fields: t.missing }).trim();
    return { text: t.text ? `${t.text}\n\n${added}` : added, fallback: kind, added };
  };
  if (t.streamError) return with_('stream_error');
  if (phase.max_turns && t.turn >= phase.max_turns && !t.completed) return with_('turn_limit');
  if (t.text) return { text: t.text };
  return with_(t.missing.length ? 'missing_fields' : 'empty_reply');
}

export interface GenUi {
  type: string;
  [field: string]: unknown;
}

/**
 * The GenUI payloads a turn shows: those the model tagged (each needs a
 * string `type`), then one per successful call of a tool the phase wraps
 * (`from_tools`), kept only if the phase allows their type.
 */
export function genuiOf(phase: PhaseDef, tagged: Record<string, unknown>[], tools: { tool: string; ok: boolean; result: unknown }[]): { shown: GenUi[]; dropped: { payload: unknown; reason: string }[] } {
  const dropped: { payload: unknown; reason: string }[] = [];
  const candidates: GenUi[] = [];
  for (const p of tagged) {
    if (typeof p.type === 'string' && p.type) candidates.push(p as GenUi);
    else dropped.push({ payload: p, reason: 'a GenUI payload needs a string type' });
  }
  for (const call of tools) {
    const wrap = phase.genui?.from_tools?.find((w) => w.tool === call.tool);
    if (wrap && call.ok) candidates.push({ type: wrap.type, payload: call.result, source: call.tool });
  }
  const allowed = phase.genui?.allowed_types;
  const shown = candidates.filter((g) => {
    if (!allowed || allowed.includes(g.type)) return true;
    dropped.push({ payload: g, reason: `type ${g.type} is not allowed in phase ${phase.id}` });
    return false;
  });
  return { shown, dropped };
}

export interface ToolRecord {
  tool_call_id: string;
  tool: string;
  args_hash: string;
  status: 'succeeded' | 'failed';
  result?: unknown;
  error?: unknown;
}

/** The records a message keeps: final outcomes, without a failure that a later success of the same tool and arguments repaired. */
export function finalToolRecords(records: ToolRecord[]): ToolRecord[] {
  return records.filter((r, i) => r.status === 'succeeded' || !records.slice(i + 1).some((later) => later.status === 'succeeded' && later.tool === r.tool && later.args_hash === r.args_hash));
}
