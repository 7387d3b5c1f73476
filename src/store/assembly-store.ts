// The assemblies and frozen_plans tables (the decision plane's), both
// insert-only: database triggers refuse updates. Definitions and plans are
// stored as the documents the decision plane built.
import type { EntityManager } from '@mikro-orm/postgresql';

/** Versions are MAJOR.MINOR.PATCH, so they order as integer arrays. */
const SEMVER_ORDER = "string_to_array(version, '.')::int[]";

export interface AssemblyKey {
  assembly_id: string;
  version: string;
  intent: string;
  contract?: { contract_id: string };
  expected_latency_ms?: number;
}

/** Inserts an assembly version; false when that id and version exist. */
export async function insertAssembly(em: EntityManager, def: AssemblyKey): Promise<boolean> {
  const inserted = await em.execute<{ assembly_id: string }[]>(
    `INSERT INTO assemblies (assembly_id, version, intent, contract_id, definition, expected_latency_ms)
     VALUES (?, ?, ?, ?, ?::jsonb, ?) ON CONFLICT DO NOTHING RETURNING assembly_id`,
    [def.assembly_id, def.version, def.intent, def.contract?.contract_id ?? null, JSON.stringify(def), def.expected_latency_ms ?? 0],
  );
  return inserted.length > 0;
}

export async function readAssembly<T>(em: EntityManager, assemblyId: string, version: string): Promise<T | undefined> {
  const [row] = await em.execute<{ definition: T }[]>('SELECT definition FROM assemblies WHERE assembly_id = ? AND version = ?', [assemblyId, version]);
  return row?.definition;
}

export async function listAssemblies<T>(em: EntityManager, intent?: string): Promise<T[]> {
  const rows = await em.execute<{ definition: T }[]>(`SELECT definition FROM assemblies ${intent ? 'WHERE intent = ?' : ''} ORDER BY assembly_id, ${SEMVER_ORDER}`, intent ? [intent] : []);
  return rows.map((r) => r.definition);
}

/** The assembly for an intent: a pinned version, else the highest version (one row read). */
export async function latestAssembly<T>(em: EntityManager, intent: string, version?: string): Promise<T | undefined> {
  const [row] = await em.execute<{ definition: T }[]>(
    `SELECT definition FROM assemblies WHERE intent = ? ${version ? 'AND version = ?' : ''}
     ORDER BY ${SEMVER_ORDER} DESC, assembly_id DESC LIMIT 1`,
    version ? [intent, version] : [intent],
  );
  return row?.definition;
}

export async function readPlan<T>(em: EntityManager, planId: string): Promise<T | undefined> {
  const [row] = await em.execute<{ plan: T }[]>('SELECT plan FROM frozen_plans WHERE plan_id = ?', [planId]);
  return row?.plan;
}

export async function insertPlan(
  em: EntityManager,
  plan: { plan_id: string; assembly_id: string; assembly_version: string; plan_hash: string },
  ticket: string | undefined,
  replaces: string | undefined,
): Promise<void> {
  await em.execute(
    `INSERT INTO frozen_plans (plan_id, ticket, assembly_id, assembly_version, plan_hash, plan, replaces_plan_id) VALUES (?, ?, ?, ?, ?, ?::jsonb, ?)`,
    [plan.plan_id, ticket ?? null, plan.assembly_id, plan.assembly_version, plan.plan_hash, JSON.stringify(plan), replaces ?? null],
  );
}
