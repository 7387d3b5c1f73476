// Reads of execution contracts for the observer, in single statements through
// the read-only pool: the observer cannot write.
import type pg from 'pg';
import type { ContractRow, TransitionRow } from '../domain/execution-views.js';
import { prepared } from './native.js';

const SELECT = `SELECT to_jsonb(c) AS contract,
  coalesce((SELECT jsonb_agg(to_jsonb(t) ORDER BY t.sequence_number) FROM execution_transitions t WHERE t.execution_id = c.execution_id), '[]') AS transitions
  FROM execution_contracts c`;

export interface ContractWithTransitions {
  contract: ContractRow;
  transitions: TransitionRow[];
}

export async function readContract(pool: pg.Pool, executionId: string): Promise<ContractWithTransitions | undefined> {
  const { rows } = await pool.query<ContractWithTransitions>(`${SELECT} WHERE c.execution_id = $1`, [executionId]);
  return rows[0];
}

/** A session's latest `limit` contracts, oldest first, and whether it has older ones (through its session index). */
export async function readLatestContracts(pool: pg.Pool, tenantId: string, sessionId: string, limit: number): Promise<{ rows: ContractWithTransitions[]; hasMore: boolean }> {
  const { rows } = await pool.query<ContractWithTransitions>({
    ...prepared(`${SELECT} WHERE c.session_id = ? AND c.tenant_id = ? ORDER BY c.created_at DESC, c.execution_id DESC LIMIT ?`),
    values: [sessionId, tenantId, limit + 1],
  });
  return { rows: rows.slice(0, limit).reverse(), hasMore: rows.length > limit };
}

/** A tenant's contracts of a session or a run. */
export async function readContracts(pool: pg.Pool, tenantId: string, where: { sessionId: string } | { runId: string }): Promise<ContractWithTransitions[]> {
  const [column, value] = 'sessionId' in where ? ['session_id', where.sessionId] : ['run_id', where.runId];
  const { rows } = await pool.query<ContractWithTransitions>({ ...prepared(`${SELECT} WHERE c.${column} = ? AND c.tenant_id = ? ORDER BY c.created_at, c.execution_id`), values: [value, tenantId] });
  return rows;
}
