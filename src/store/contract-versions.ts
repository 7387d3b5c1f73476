// Contract versions registered through the API (table contract_versions,
// insert-only). Its one writer; every core reads it on a registry miss.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ContractDefinition } from '../domain/contract.js';

/** Inserts a version; false when that id and version already exist. */
export async function insertContractVersion(em: EntityManager, def: ContractDefinition): Promise<boolean> {
  const rows = await em.execute<{ contract_id: string }[]>(
    'INSERT INTO contract_versions (contract_id, version, intent, definition) VALUES (?, ?, ?, ?::jsonb) ON CONFLICT DO NOTHING RETURNING contract_id',
    [def.contract_id, def.version, def.intent, JSON.stringify(def)],
  );
  return rows.length > 0;
}

/** Registered versions: all, or those of one contract. */
export async function readContractVersions(em: EntityManager, contractId?: string): Promise<ContractDefinition[]> {
  const rows = await em.execute<{ definition: ContractDefinition }[]>(
    `SELECT definition FROM contract_versions ${contractId ? 'WHERE contract_id = ?' : ''} ORDER BY contract_id, string_to_array(version, '.')::int[]`,
    contractId ? [contractId] : [],
  );
  return rows.map((r) => r.definition);
}
