// What an agent is told about the world before it acts: the session's
// consequence views (seed 004), structured and as the seed's prompt text.
import type pg from 'pg';
import { readLatestContracts } from '../store/execution-reads.js';
import { consequenceViews, renderConsequences } from '../domain/execution-views.js';

/** Actions whose consequences the prompt text reports (seed 004 reports tool calls; ABC also its other actions). */
export const PROMPT_ACTION_TYPES = ['tool_call', 'contract_step', 'agent_call'];

/**
 * The consequences of the session's latest `limit` actions, and `truncated`
 * when it has older ones (the whole list: GET /api/execution/{session_id}/consequences).
 * A session just `opened` has no contracts, and nothing is read.
 */
export async function sessionConsequences(
  pool: pg.Pool,
  tenantId: string,
  sessionId: string,
  opened: boolean,
  limit: number,
): Promise<{ views: unknown[]; prompt_text: string; truncated?: { sent_views: number; limit: number } }> {
  const { rows, hasMore } = opened ? { rows: [], hasMore: false } : await readLatestContracts(pool, tenantId, sessionId, limit);
  const views = consequenceViews(rows.map((r) => r.contract), rows.flatMap((r) => r.transitions));
  return { views, prompt_text: renderConsequences(views, PROMPT_ACTION_TYPES), ...(hasMore && { truncated: { sent_views: views.length, limit } }) };
}
