// Run and tool metrics (seed 001 §9), aggregated in PostgreSQL through the
// read-only pool. Durations are milliseconds; rates are over finished items.
import type pg from 'pg';

export interface RunMetrics {
  total: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  success_rate: number;
  p50_duration_ms: number;
  p95_duration_ms: number;
}

export interface ToolMetrics {
  tool_name: string;
  total: number;
  succeeded: number;
  failed: number;
  success_rate: number;
  p95_duration_ms: number;
  p95_approval_wait_ms: number;
}

const ms = (a: string, b: string) => `extract(epoch FROM (${a} - ${b})) * 1000`;

export async function runMetrics(pool: pg.Pool, tenantId: string, sinceMs: number, agentId: string): Promise<RunMetrics> {
  const { rows } = await pool.query<Record<string, number | null>>(
    `SELECT count(*)::int AS total,
            count(*) FILTER (WHERE status = 'DONE')::int AS succeeded,
            count(*) FILTER (WHERE status = 'FAILED')::int AS failed,
            count(*) FILTER (WHERE status = 'CANCELLED')::int AS cancelled,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY ${ms('ended_at', 'started_at')}) FILTER (WHERE ended_at IS NOT NULL) AS p50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY ${ms('ended_at', 'started_at')}) FILTER (WHERE ended_at IS NOT NULL) AS p95
     FROM runs WHERE tenant_id = $3 AND started_at >= to_timestamp($1 / 1000.0) AND ($2 = '' OR root_agent_id = $2)`,
    [sinceMs, agentId, tenantId],
  );
  const r = rows[0]!;
  const finished = Number(r.succeeded) + Number(r.failed) + Number(r.cancelled);
  return {
    total: Number(r.total),
    succeeded: Number(r.succeeded),
    failed: Number(r.failed),
    cancelled: Number(r.cancelled),
    success_rate: finished ? Number(r.succeeded) / finished : 0,
    p50_duration_ms: Number(r.p50 ?? 0),
    p95_duration_ms: Number(r.p95 ?? 0),
  };
}

export async function toolMetrics(pool: pg.Pool, tenantId: string, sinceMs: number): Promise<ToolMetrics[]> {
  const { rows } = await pool.query<Record<string, string | number | null>>(
    `SELECT t.tool_name,
            count(*)::int AS total,
            count(*) FILTER (WHERE t.status = 'SUCCEEDED')::int AS succeeded,
            count(*) FILTER (WHERE t.status IN ('FAILED', 'TIMEOUT', 'BLOCKED', 'REJECTED'))::int AS failed,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY ${ms('t.completed_at', 't.started_at')}) FILTER (WHERE t.completed_at IS NOT NULL AND t.started_at IS NOT NULL) AS p95,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY ${ms('a.decided_at', 'a.created_at')}) FILTER (WHERE a.decided_at IS NOT NULL) AS p95_wait
     FROM tool_calls t JOIN runs r ON r.run_id = t.run_id LEFT JOIN approvals a ON a.tool_call_id = t.tool_call_id
     WHERE r.tenant_id = $2 AND t.created_at >= to_timestamp($1 / 1000.0)
     GROUP BY t.tool_name ORDER BY t.tool_name`,
    [sinceMs, tenantId],
  );
  return rows.map((r) => {
    const finished = Number(r.succeeded) + Number(r.failed);
    return {
      tool_name: String(r.tool_name),
      total: Number(r.total),
      succeeded: Number(r.succeeded),
      failed: Number(r.failed),
      success_rate: finished ? Number(r.succeeded) / finished : 0,
      p95_duration_ms: Number(r.p95 ?? 0),
      p95_approval_wait_ms: Number(r.p95_wait ?? 0),
    };
  });
}
