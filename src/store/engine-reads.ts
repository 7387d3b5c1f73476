// The observer's reads of the engine (seed 002): an execution's trace, its
// GlobalState and ExecutionContext, and memory search. Each is one statement
// through the read-only pool.
import type pg from 'pg';
import { goalOf } from '../domain/goal.js';
import type { MemoryScope } from '../domain/engine-types.js';
import { memorySearchSql, scopeIdOf, type MemoryEntry } from './memory.js';

export interface TraceEventRow {
  seq: number;
  ts: number;
  type: string;
  payload: Record<string, unknown> | null;
}

/** A ticket's trace; another tenant's ticket is undefined. */
export async function readTrace(pool: pg.Pool, tenantId: string, ticket: string, types: string[]): Promise<{ trace_id: string; events: TraceEventRow[] } | undefined> {
  const { rows } = await pool.query<{ trace_id: string; events: TraceEventRow[] }>(
    `SELECT c.trace_id, coalesce((SELECT jsonb_agg(jsonb_build_object('seq', e.seq, 'ts', e.ts, 'type', e.type, 'payload', e.payload) ORDER BY e.seq)
       FROM ticket_events e WHERE e.ticket = c.ticket AND (cardinality($2::text[]) = 0 OR e.type = ANY($2::text[]))), '[]') AS events
     FROM tickets c WHERE c.ticket = $1 AND c.tenant_id = $3`,
    [ticket, types, tenantId],
  );
  return rows[0];
}

interface ContextRow {
  ticket: string;
  request: Record<string, any>;
  lifecycle_state: string;
  trace_id: string;
  created_at: Date;
  engine: Record<string, any>;
  plan: Record<string, any> | null;
  steps: { step_id: string; status: string; output: unknown }[];
  snapshots: { snapshot_id: string; lifecycle_state: string; label: string; created_at: string }[];
}

/** Seed 002's GlobalState and ExecutionContext of an execution, and its snapshots. */
export async function readExecutionContext(pool: pg.Pool, tenantId: string, ticket: string) {
  const { rows } = await pool.query<ContextRow>(
    `SELECT c.ticket, c.request, c.lifecycle_state, c.trace_id, c.created_at, c.engine,
       (SELECT p.plan FROM frozen_plans p WHERE p.plan_id = c.plan_id) AS plan,
       coalesce((SELECT jsonb_agg(jsonb_build_object('step_id', s.step_id, 'status', s.status, 'output', s.output) ORDER BY s.position) FROM ticket_steps s WHERE s.ticket = c.ticket), '[]') AS steps,
       coalesce((SELECT jsonb_agg(jsonb_build_object('snapshot_id', n.snapshot_id, 'lifecycle_state', n.lifecycle_state, 'label', n.context->>'label', 'created_at', n.created_at) ORDER BY n.created_at, n.snapshot_id)
         FROM snapshots n WHERE n.ticket = c.ticket), '[]') AS snapshots
     FROM tickets c WHERE c.ticket = $1 AND c.tenant_id = $2`,
    [ticket, tenantId],
  );
  const r = rows[0];
  if (!r) return undefined;
  const rec = r.engine ?? {};
  return {
    global_state: {
      execution_id: r.ticket,
      original_goal: goalOf(r.request as { intent: string }),
      lifecycle_state: r.lifecycle_state,
      iteration_count: rec.iteration ?? 0,
      trace_id: r.trace_id,
      created_at: new Date(r.created_at).toISOString(),
    },
    execution_context: {
      current_plan: r.plan && { plan_id: r.plan.plan_id, plan_hash: r.plan.plan_hash, assembly_id: r.plan.assembly_id, assembly_version: r.plan.assembly_version, replaces_plan_id: r.plan.replaces_plan_id ?? null, steps: r.plan.steps },
      active_steps: Object.fromEntries(r.steps.map((s) => [s.step_id, s.status])),
      current_batch_id: rec.batch?.id ?? null,
      replan_scope: rec.replan?.scope ?? null,
      intermediate_results: Object.fromEntries(r.steps.filter((s) => s.status === 'SUCCEEDED').map((s) => [s.step_id, s.output])),
      errors: (rec.errors ?? []).map((e: { code: string; message: string }) => `${e.code}: ${e.message}`),
      snapshot_id: rec.snapshot_id ?? null,
      consecutive_failures: rec.consecutive_failures ?? 0,
      avoid: rec.avoid ?? [],
      approved_steps: rec.approved_steps ?? [],
      human_feedback: rec.feedback ?? [],
    },
    human_request: rec.human ?? null,
    snapshots: r.snapshots.map((s) => ({ ...s, created_at: new Date(s.created_at).toISOString() })),
  };
}

export async function searchMemory(pool: pg.Pool, tenantId: string, scope: MemoryScope, scopeId: string, query: string, limit: number): Promise<MemoryEntry[]> {
  let n = 0;
  const { rows } = await pool.query<MemoryEntry & { created_at: Date }>(memorySearchSql(scope).replace(/\?/g, () => `$${++n}`), [query, tenantId, scope, scopeIdOf(scope, scopeId), limit]);
  return rows.map((r) => ({ ...r, created_at: new Date(r.created_at).toISOString(), rank: Number(r.rank) }));
}
