// Seed 002 memory in PostgreSQL. Every call names its scope: EPHEMERAL (one
// step, cleared after its review), SESSION (one execution) or GLOBAL (across
// executions). Search is full-text (GLOBAL's through the memory_search index).
// Failure patterns are GLOBAL counters the planner consults.
import type { EntityManager } from '@mikro-orm/postgresql';
import { executeOne } from './native.js';
import { newId } from '../runtime/new-id.js';
import { MEMORY_SCOPES, type MemoryScope } from '../domain/engine-types.js';

export const GLOBAL_SCOPE_ID = 'global';

/** How long a failure pattern steers planners away from its capability after it was last seen. */
export const FAILURE_MEMORY_MS = 24 * 3_600_000;

export interface MemoryEntry {
  scope: MemoryScope;
  scope_id: string;
  key: string;
  value: unknown;
  tags: string[];
  created_at: string;
  rank?: number;
}

export interface FailurePattern {
  intent: string;
  capability: string;
  code: string;
  message: string;
  suggested_action?: string;
}

/**
 * An entry's full-text document. GLOBAL entries keep it in the stored column
 * `search`, indexed (migration memory_search_global); a SESSION or EPHEMERAL
 * scope holds a few rows, found by the scope key, whose documents a search
 * builds as it reads them.
 */
const DOCUMENT = "to_tsvector('simple', key || ' ' || coalesce(value::text, ''))";

/** Full-text search of one scope and scope id; parameters: query, tenant, scope, scope id, limit. */
export function memorySearchSql(scope: MemoryScope): string {
  const global = scope === 'GLOBAL';
  const doc = global ? 'search' : DOCUMENT;
  return `SELECT scope, scope_id, key, value, coalesce(tags, '[]') AS tags, created_at, ts_rank(${doc}, q) AS rank
  FROM memory, websearch_to_tsquery('simple', ?) q
  WHERE tenant_id = ? AND scope = ? AND scope_id = ? AND ${doc} @@ q${global ? " AND scope = 'GLOBAL'" : ''}
  ORDER BY rank DESC, created_at DESC LIMIT ?`;
}

const row = (r: { scope: MemoryScope; scope_id: string; key: string; value: unknown; tags: string[] | null; created_at: Date; rank?: number }): MemoryEntry => ({
  scope: r.scope,
  scope_id: r.scope_id,
  key: r.key,
  value: r.value,
  tags: r.tags ?? [],
  created_at: new Date(r.created_at).toISOString(),
  ...(r.rank !== undefined && { rank: Number(r.rank) }),
});

/** GLOBAL memory has one scope id, whatever the caller names. */
export const scopeIdOf = (scope: MemoryScope, scopeId: string) => (scope === 'GLOBAL' ? GLOBAL_SCOPE_ID : scopeId);

/** A memory entry as written: what a writer that stores with its own statement (store/step-commit.ts) passes on. */
export interface MemoryRow {
  memory_id: string;
  tenant_id: string;
  scope: MemoryScope;
  scope_id: string;
  key: string;
  value: unknown;
  tags: string[];
}

export const memoryRow = (tenantId: string, key: string, value: unknown, scope: MemoryScope, scopeId: string, tags: string[] = []): MemoryRow => ({
  memory_id: newId('mem'),
  tenant_id: tenantId,
  scope,
  scope_id: scopeIdOf(scope, scopeId),
  key,
  value: value ?? null,
  tags,
});

/** Stores entries; one with the same scope and key is replaced. */
export async function storeMemoryRows(tx: EntityManager, rows: MemoryRow[]): Promise<void> {
  if (!rows.length) return;
  const upsert = memoryUpsert(rows);
  await tx.execute(upsert.sql, upsert.params);
}

/** The statement that stores entries, for a writer that sends it with its own statement. */
export const memoryUpsert = (rows: MemoryRow[]) => ({
  sql: `INSERT INTO memory (memory_id, tenant_id, scope, scope_id, key, value, tags)
        SELECT m.memory_id, m.tenant_id, m.scope, m.scope_id, m.key, m.value, m.tags
        FROM jsonb_to_recordset(?::jsonb) AS m(memory_id text, tenant_id text, scope text, scope_id text, key text, value jsonb, tags jsonb)
        ON CONFLICT (tenant_id, scope, scope_id, key) DO UPDATE SET value = EXCLUDED.value, tags = EXCLUDED.tags, created_at = now()`,
  params: [JSON.stringify(rows)],
});

/**
 * The statement that deletes a scope's entries, for a writer that sends it with its own statement.
 * Not inJsonList: a scope's own entries are few (EPHEMERAL ones go with their ticket), and the
 * planner reads a small, busy table whole for an array. The scope is written into the text: as a
 * parameter, a prepared statement's generic plan takes it for a third of the table and reads it
 * whole, so PostgreSQL plans the writer's whole statement again on every execution instead.
 */
export const memoryClear = (tenantId: string, scope: MemoryScope, scopeIds: string[]) => {
  if (!MEMORY_SCOPES.includes(scope)) throw new Error(`not a memory scope: ${String(scope)}`);
  return {
    sql: `DELETE FROM memory WHERE tenant_id = ? AND scope = '${scope}' AND scope_id IN (SELECT jsonb_array_elements_text(?::jsonb))`,
    params: [tenantId, JSON.stringify(scopeIds)],
  };
};

/**
 * A scope's keys under `prefix` (which ends in ASCII), as a range of
 * idx_memory_key_bytes: byte order, so the range is exact in any collation,
 * where starts_with() scans every key of the scope.
 */
function keyPrefix(prefix: string): { sql: string; params: string[] } {
  const after = prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
  return { sql: 'key COLLATE "C" >= ? AND key COLLATE "C" < ?', params: [prefix, after] };
}

/**
 * How many success cases GLOBAL memory keeps per tenant and intent: the
 * newest. Seed 002's success-case cache, which the context builder searches
 * for its hints; unbounded, that search ranked every success the intent ever
 * had, on every execution.
 */
export const SUCCESS_CASES_KEPT = 20;

const successPrefix = (intent: string) => `success:${intent}:`;

/** A success case's key: one per ticket, under its intent's prefix (an intent is snake_case, so no prefix holds another's). */
export const successKey = (intent: string, ticket: string) => `${successPrefix(intent)}${ticket}`;

/** A tenant's success cases of an intent, as a condition its key index answers. */
function successCases(tenantId: string, intent: string): { sql: string; params: string[] } {
  const keys = keyPrefix(successPrefix(intent));
  return { sql: `tenant_id = ? AND scope = 'GLOBAL' AND scope_id = ? AND ${keys.sql}`, params: [tenantId, GLOBAL_SCOPE_ID, ...keys.params] };
}

/**
 * The statements that store a success case and drop the intent's older ones,
 * for a writer that sends them with its own statement. The new case and the
 * SUCCESS_CASES_KEPT - 1 newest before it stay; cases a concurrent writer is
 * dropping are skipped, not waited for.
 */
export function successCaseWrite(row: MemoryRow, intent: string): { sql: string; params: unknown[] }[] {
  return [memoryUpsert([row]), successCasesTrim(row.tenant_id, intent)];
}

/** The statement of successCaseWrite that drops an intent's success cases older than the SUCCESS_CASES_KEPT - 1 newest. */
export function successCasesTrim(tenantId: string, intent: string): { sql: string; params: unknown[] } {
  const cases = successCases(tenantId, intent);
  return {
    sql: `DELETE FROM memory WHERE memory_id IN (
            SELECT memory_id FROM memory WHERE ${cases.sql}
              AND created_at < (SELECT created_at FROM memory WHERE ${cases.sql} ORDER BY created_at DESC LIMIT 1 OFFSET ?)
            FOR UPDATE SKIP LOCKED)`,
    params: [...cases.params, ...cases.params, SUCCESS_CASES_KEPT - 2],
  };
}

/** What memory says about an intent, for the context builder (seed 002's memory hints). */
export interface IntentHints {
  /** Recorded failures per capability, over patterns seen within FAILURE_MEMORY_MS. */
  failure_counts: Record<string, number>;
  /** The values of the intent's newest success cases, newest first. */
  similar_successes: unknown[];
}

/**
 * The statement of Memory.intentHints, and its parameters: both reads in one
 * round trip, each by its keys' index. A capability that failed long ago
 * (before `withinMs`) gets its chance again. The success cases were found by
 * a full-text search of GLOBAL memory for "success <intent>" before; its
 * generic plan, once the table had statistics, could take the full-text index,
 * whose scans visit every case the final moves dropped (one a contract) until
 * a vacuum: 5.7–6.3 ms a search on average at c=16 in `bench/contract-cpu`,
 * 36 ms with 4,000 dropped.
 */
export function intentHintsRead(tenantId: string, intent: string, limit: number, withinMs = FAILURE_MEMORY_MS): { sql: string; params: unknown[] } {
  const failures = keyPrefix(`failure:${intent}:`);
  const cases = successCases(tenantId, intent);
  return {
    sql: `SELECT
      (SELECT coalesce(jsonb_object_agg(f.capability, f.count), '{}') FROM (
         SELECT value->>'capability' AS capability, sum((value->>'count')::int)::int AS count FROM memory
         WHERE tenant_id = ? AND scope = 'GLOBAL' AND scope_id = ? AND ${failures.sql}
           AND created_at > now() - (? || ' milliseconds')::interval AND value->>'capability' IS NOT NULL
         GROUP BY 1) f) AS failure_counts,
      (SELECT coalesce(jsonb_agg(s.value ORDER BY s.created_at DESC), '[]') FROM (
         SELECT value, created_at FROM memory WHERE ${cases.sql} ORDER BY created_at DESC LIMIT ?) s) AS similar_successes`,
    params: [tenantId, GLOBAL_SCOPE_ID, ...failures.params, withinMs, ...cases.params, limit],
  };
}

/** How many success cases the context builder's hints hold. */
export const HINTED_SUCCESSES = 5;

/** Memory is per tenant: GLOBAL means across one tenant's executions, never across tenants. */
export class Memory {
  /** Hints read ahead of their context build, by ticket (readAhead). */
  readonly #ahead = new Map<string, { tenantId: string; intent: string; hints: Promise<IntentHints> }>();

  constructor(readonly em: () => EntityManager) {}

  /** Stores (or replaces) `key` in a scope. */
  async store(tenantId: string, key: string, value: unknown, scope: MemoryScope, scopeId: string, tags: string[] = [], tx: EntityManager = this.em()): Promise<void> {
    await storeMemoryRows(tx, [memoryRow(tenantId, key, value, scope, scopeId, tags)]);
  }

  async retrieve(tenantId: string, key: string, scope: MemoryScope, scopeId: string, em: EntityManager = this.em()): Promise<unknown> {
    const [r] = await em.execute<{ value: unknown }[]>('SELECT value FROM memory WHERE tenant_id = ? AND scope = ? AND scope_id = ? AND key = ?', [tenantId, scope, scopeIdOf(scope, scopeId), key]);
    return r?.value;
  }

  /** Full-text search in a scope (and scope id, except GLOBAL), best matches first. */
  async search(tenantId: string, query: string, scope: MemoryScope, scopeId: string, limit = 20, em: EntityManager = this.em()): Promise<MemoryEntry[]> {
    const rows = await executeOne<Parameters<typeof row>[0]>(em, memorySearchSql(scope), [query, tenantId, scope, scopeIdOf(scope, scopeId), limit]);
    return rows.map(row);
  }

  /**
   * What memory says about `intent` (IntentHints), in one statement. For
   * `ticket`, the read readAhead started, if it did: the context build takes
   * it once; one that failed, or was started for another tenant or intent, is
   * read again.
   */
  async intentHints(tenantId: string, intent: string, ticket?: string): Promise<IntentHints> {
    const ahead = ticket === undefined ? undefined : this.#ahead.get(ticket);
    if (ahead) {
      this.#ahead.delete(ticket!);
      if (ahead.tenantId === tenantId && ahead.intent === intent) {
        const hints = await ahead.hints.catch(() => undefined);
        if (hints) return hints;
      }
    }
    return this.#readHints(tenantId, intent);
  }

  /**
   * Starts reading `intent`'s hints for the context build of `ticket`, ahead
   * of it: a sync submission reads them while its ticket is being admitted.
   * What no context build takes stays until dropReadAhead. Resolves when
   * the read has settled, and never rejects: a failed read is the context
   * build's to read again.
   */
  readAhead(ticket: string, tenantId: string, intent: string): Promise<void> {
    const hints = this.#readHints(tenantId, intent);
    this.#ahead.set(ticket, { tenantId, intent, hints });
    return hints.then(
      () => undefined,
      () => undefined,
    );
  }

  /** Drops what readAhead started for `ticket`, if no context build took it. */
  dropReadAhead(ticket: string): void {
    this.#ahead.delete(ticket);
  }

  async #readHints(tenantId: string, intent: string): Promise<IntentHints> {
    const read = intentHintsRead(tenantId, intent, HINTED_SUCCESSES);
    const [row] = await executeOne<IntentHints>(this.em(), read.sql, read.params);
    return row!;
  }

  /** Counts one more occurrence of a failure pattern (GLOBAL). */
  async recordFailurePattern(tenantId: string, p: FailurePattern, tx: EntityManager = this.em()): Promise<void> {
    const value = { type: 'failure_pattern', ...p, count: 1, last_seen: new Date().toISOString() };
    await tx.execute(
      `INSERT INTO memory (memory_id, tenant_id, scope, scope_id, key, value, tags) VALUES (?, ?, 'GLOBAL', ?, ?, ?::jsonb, '["failure_pattern"]'::jsonb)
       ON CONFLICT (tenant_id, scope, scope_id, key) DO UPDATE SET
         value = EXCLUDED.value || jsonb_build_object('count', coalesce((memory.value->>'count')::int, 0) + 1), created_at = now()`,
      [newId('mem'), tenantId, GLOBAL_SCOPE_ID, `failure:${p.intent}:${p.capability}:${p.code}`, JSON.stringify(value)],
    );
  }

  async clear(tenantId: string, scope: MemoryScope, scopeIds: string[], tx: EntityManager = this.em()): Promise<void> {
    if (!scopeIds.length) return;
    const remove = memoryClear(tenantId, scope, scopeIds);
    await tx.execute(remove.sql, remove.params);
  }
}
