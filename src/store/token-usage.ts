// Tokens spent on LLM calls, per run (runs.tokens_used, in run-store) and per
// tenant and UTC day (this table), for the policy's token budgets.
import type { EntityManager } from '@mikro-orm/postgresql';

/** Adds a call's tokens to its tenant's count for today. */
export async function addTenantTokens(em: EntityManager, tenantId: string, tokens: number): Promise<void> {
  await em.execute(
    `INSERT INTO token_usage (tenant_id, day, tokens) VALUES (?, (now() AT TIME ZONE 'UTC')::date, ?)
     ON CONFLICT (tenant_id, day) DO UPDATE SET tokens = token_usage.tokens + EXCLUDED.tokens`,
    [tenantId, tokens],
  );
}

/** What a run and its tenant have spent (today, UTC), in one statement. */
export async function tokensSpent(em: EntityManager, tenantId: string, runId: string | null): Promise<{ run: number; tenantToday: number }> {
  const [row] = await em.execute<{ run: number | null; tenant: string | null }[]>(
    `SELECT (SELECT tokens_used FROM runs WHERE run_id = ?) AS run,
            (SELECT tokens FROM token_usage WHERE tenant_id = ? AND day = (now() AT TIME ZONE 'UTC')::date) AS tenant`,
    [runId, tenantId],
  );
  return { run: Number(row?.run ?? 0), tenantToday: Number(row?.tenant ?? 0) };
}
