// EXECUTION_PREPARE: the step rows follow the current plan. New steps are
// added (each with its seed 004 execution contract), steps a replan puts back
// are reset, except a step with side effects that already succeeded: it is kept
// and never replayed. Steps the plan no longer has are skipped if not yet run.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { FrozenPlanDoc } from '../decision/decision.js';
import type { UnitCatalog } from '../execution/units.js';
import { contractsInsert, openContracts, type NewContract } from '../store/execution-contracts.js';
import { TOOL_CAPABILITY_PREFIX } from './pep.js';
import { appendTicketEvents, getSteps, insertSteps, newStepRows, retargetStep, stepsInsert, transitionStep, type NewStep, type StepRow, type TicketEventInput, type TicketRow } from '../store/ticket-store.js';
import { toolsWithSideEffects } from '../store/tool-store.js';

/** Syncs the ticket's steps with `plan`; every step row as written, in position order. */
export async function syncSteps(tx: EntityManager, units: UnitCatalog, row: TicketRow, plan: FrozenPlanDoc, reset: string[] | null): Promise<StepRow[]> {
  const existing = new Map((await getSteps(tx, row.ticket)).map((s) => [s.step_id, s]));
  const rows = new Map(existing);
  const wrote = (step: StepRow) => void rows.set(step.step_id, step);
  const effects = await sideEffectsOf(tx, units, row, plan);
  const fresh = plan.steps.map((s, i) => ({ s, i })).filter(({ s }) => !existing.has(s.id));
  if (fresh.length) {
    (await insertSteps(tx, row.ticket, fresh.map(({ s, i }) => newStep(s, i, effects)))).forEach(wrote);
    await openContracts(tx, fresh.map(({ s }) => newContract(row, s, effects)));
    for (const { s } of fresh) if (s.skipped) wrote(await transitionStep(tx, row.ticket, s.id, 'skip', { message: s.skip_reason ?? 'not requested' }));
  }
  const kept: TicketEventInput[] = [];
  for (const s of plan.steps.filter((x) => existing.has(x.id))) {
    const current = existing.get(s.id)!;
    const retarget = async () => wrote(await retargetStep(tx, row.ticket, s.id, { capability: s.tool_name, side_effect: effects.has(s.tool_name), label: s.label }));
    if (!reset?.includes(s.id)) {
      if (current.status === 'PENDING' && current.capability !== s.tool_name) await retarget();
      continue;
    }
    if (current.status === 'SUCCEEDED' && current.side_effect) {
      kept.push({ type: 'step_kept', payload: { step_id: s.id, capability: current.capability, reason: 'its side effects already happened; it is never replayed', plan_id: plan.plan_id } });
      continue;
    }
    if (current.status === 'SUCCEEDED' || current.status === 'FAILED' || current.status === 'SKIPPED') {
      wrote(await transitionStep(tx, row.ticket, s.id, 'reset', { capability: s.tool_name, message: `replanned (${plan.plan_id})` }));
    }
    await retarget();
    if (s.skipped) wrote(await transitionStep(tx, row.ticket, s.id, 'skip', { message: s.skip_reason ?? 'not requested' }));
  }
  const planned = new Set(plan.steps.map((s) => s.id));
  for (const s of existing.values()) {
    if (!planned.has(s.step_id) && s.status === 'PENDING') wrote(await transitionStep(tx, row.ticket, s.step_id, 'skip', { message: `superseded by plan ${plan.plan_id}` }));
  }
  await appendTicketEvents(tx, row.ticket, kept);
  return [...rows.values()].sort((a, b) => a.position - b.position);
}

/**
 * The steps of a ticket's first plan (it has no steps yet): their INSERT and
 * their contracts', for the statement that prepares the plan, and the rows as
 * they will read. Undefined when a step is planned skipped: its skip is a move.
 */
export async function firstSteps(em: EntityManager, units: UnitCatalog, row: TicketRow, plan: Pick<FrozenPlanDoc, 'steps'>): Promise<{ rows: StepRow[]; writes: { sql: string; params: unknown[] }[] } | undefined> {
  if (plan.steps.some((s) => s.skipped)) return undefined;
  const effects = await sideEffectsOf(em, units, row, plan);
  const steps = plan.steps.map((s, i) => newStep(s, i, effects));
  return { rows: newStepRows(row.ticket, steps), writes: [stepsInsert(row.ticket, steps), contractsInsert(plan.steps.map((s) => newContract(row, s, effects)))] };
}

type PlannedStep = FrozenPlanDoc['steps'][number];

const newStep = (s: PlannedStep, position: number, effects: Set<string>): NewStep => ({ step_id: s.id, position, label: s.label, capability: s.tool_name, side_effect: effects.has(s.tool_name) });

/** A step's seed 004 execution contract. */
const newContract = (row: TicketRow, s: PlannedStep, effects: Set<string>): NewContract => ({
  sessionId: row.session_id,
  ticket: row.ticket,
  subjectId: s.id,
  actionType: 'contract_step',
  actionSummary: `${s.tool_name} → ${s.label}`,
  irreversible: effects.has(s.tool_name),
  idempotencyKey: `${row.ticket}:${s.id}`,
  timeoutSeconds: Math.ceil(s.timeout_ms / 1000),
});

/** The capabilities a plan may run (each step's and its fallback's) that have side effects. */
const sideEffectsOf = (em: EntityManager, units: UnitCatalog, row: TicketRow, plan: Pick<FrozenPlanDoc, 'steps'>) =>
  sideEffects(em, units, row.tenant_id, plan.steps.flatMap((s) => [s.tool_name, ...(s.fallback_tool ? [s.fallback_tool] : [])]));

/** The capabilities among `capabilities` with side effects: registered tools so declared, and built-in units. */
async function sideEffects(tx: EntityManager, units: UnitCatalog, tenantId: string, capabilities: string[]): Promise<Set<string>> {
  const out = new Set(capabilities.filter((c) => units.meta(c)?.side_effect));
  const tools = capabilities.filter((c) => c.startsWith(TOOL_CAPABILITY_PREFIX)).map((c) => c.slice(TOOL_CAPABILITY_PREFIX.length));
  if (!tools.length) return out;
  for (const name of await toolsWithSideEffects(tx, tenantId, tools)) out.add(`${TOOL_CAPABILITY_PREFIX}${name}`);
  return out;
}
