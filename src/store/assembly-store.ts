// The assemblies and frozen_plans tables (the decision plane's), both
// insert-only: database triggers refuse updates. Assemblies belong to a tenant
// or to the platform (`*`), whose assemblies every tenant sees. Definitions and plans are
// stored as the documents the decision plane built.
import type { EntityManager } from '@mikro-orm/postgresql';
import { executeOne } from './native.js';
import { PLATFORM_TENANT } from '../domain/ids.js';
import { ASSEMBLIES_CHANNEL } from './event-bus.js';

/** Versions are MAJOR.MINOR.PATCH, so they order as integer arrays. */
const SEMVER_ORDER = "string_to_array(version, '.')::int[]";

export interface AssemblyKey {
  assembly_id: string;
  version: string;
  intent: string;
  contract?: { contract_id: string };
  expected_latency_ms?: number;
}

/** A tenant's view: its own assemblies first, then the platform's. */
const VISIBLE = `tenant_id IN (?, '${PLATFORM_TENANT}')`;
const OWN_FIRST = `(tenant_id = '${PLATFORM_TENANT}')`;

/**
 * Inserts a tenant's assembly version (PLATFORM_TENANT for the platform's);
 * false when it has that id and version. A version inserted tells every core
 * (ASSEMBLIES_CHANNEL), whose latest for its intent may have changed.
 */
export async function insertAssembly(em: EntityManager, tenantId: string, def: AssemblyKey): Promise<boolean> {
  const inserted = await em.execute<{ assembly_id: string }[]>(
    `WITH i AS (
       INSERT INTO assemblies (tenant_id, assembly_id, version, intent, contract_id, definition, expected_latency_ms)
       VALUES (?, ?, ?, ?, ?, ?::jsonb, ?) ON CONFLICT DO NOTHING RETURNING assembly_id, tenant_id)
     SELECT assembly_id, pg_notify('${ASSEMBLIES_CHANNEL}', tenant_id) FROM i`,
    [tenantId, def.assembly_id, def.version, def.intent, def.contract?.contract_id ?? null, JSON.stringify(def), def.expected_latency_ms ?? 0],
  );
  return inserted.length > 0;
}

/** A version the tenant sees: its own, else the platform's. */
export async function readAssembly<T>(em: EntityManager, tenantId: string, assemblyId: string, version: string): Promise<T | undefined> {
  const [row] = await executeOne<{ definition: T }>(em, `SELECT definition FROM assemblies WHERE ${VISIBLE} AND assembly_id = ? AND version = ? ORDER BY ${OWN_FIRST} LIMIT 1`, [tenantId, assemblyId, version]);
  return row?.definition;
}

/** Every version the tenant sees, with where each came from. */
export async function listAssemblies<T>(em: EntityManager, tenantId: string, intent?: string): Promise<{ tenant_id: string; definition: T }[]> {
  return em.execute<{ tenant_id: string; definition: T }[]>(
    `SELECT tenant_id, definition FROM assemblies WHERE ${VISIBLE} ${intent ? 'AND intent = ?' : ''} ORDER BY assembly_id, ${SEMVER_ORDER}, ${OWN_FIRST}`,
    intent ? [tenantId, intent] : [tenantId],
  );
}

/**
 * The assembly for an intent (one row read): a pinned version, else the
 * highest; the tenant's own assemblies for the intent win over the platform's.
 */
export async function latestAssembly<T>(em: EntityManager, tenantId: string, intent: string, version?: string): Promise<T | undefined> {
  const [row] = await executeOne<{ definition: T }>(
    em,
    `SELECT definition FROM assemblies WHERE ${VISIBLE} AND intent = ? ${version ? 'AND version = ?' : ''}
     ORDER BY ${OWN_FIRST}, ${SEMVER_ORDER} DESC, assembly_id DESC LIMIT 1`,
    version ? [tenantId, intent, version] : [tenantId, intent],
  );
  return row?.definition;
}

export async function readPlan<T>(em: EntityManager, planId: string): Promise<T | undefined> {
  const [row] = await em.execute<{ plan: T }[]>('SELECT plan FROM frozen_plans WHERE plan_id = ?', [planId]);
  return row?.plan;
}

export async function insertPlan(em: EntityManager, plan: { plan_id: string; assembly_id: string; assembly_version: string; plan_hash: string }, ticket: string | undefined, replaces: string | undefined): Promise<void> {
  const insert = planInsert(plan, ticket, replaces);
  await em.execute(insert.sql, insert.params);
}

/** A frozen plan's INSERT, for a statement that writes it with other records. */
export function planInsert(plan: { plan_id: string; assembly_id: string; assembly_version: string; plan_hash: string }, ticket: string | undefined, replaces: string | undefined): { sql: string; params: unknown[] } {
  return {
    sql: 'INSERT INTO frozen_plans (plan_id, ticket, assembly_id, assembly_version, plan_hash, plan, replaces_plan_id) VALUES (?::text, ?::text, ?::text, ?::text, ?::text, ?::jsonb, ?::text)',
    params: [plan.plan_id, ticket ?? null, plan.assembly_id, plan.assembly_version, plan.plan_hash, JSON.stringify(plan), replaces ?? null],
  };
}
