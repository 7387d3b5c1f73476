// Contract versions registered through the API (table contract_versions,
// insert-only), each the platform's (`*`) or one tenant's. Its one writer;
// every core reads it on a registry miss.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ContractDefinition } from '../domain/contract.js';

/** Inserts a version; false when the tenant has that id and version already. */
export async function insertContractVersion(em: EntityManager, tenantId: string, def: ContractDefinition): Promise<boolean> {
  const rows = await em.execute<{ contract_id: string }[]>(
    'INSERT INTO contract_versions (tenant_id, contract_id, version, intent, definition) VALUES (?, ?, ?, ?, ?::jsonb) ON CONFLICT DO NOTHING RETURNING contract_id',
    [tenantId, def.contract_id, def.version, def.intent, JSON.stringify(def)],
  );
  return rows.length > 0;
}

/** Registered versions of the given owners (tenants, `*`): all, or those of one contract. */
export async function readContractVersions(em: EntityManager, owners: readonly string[], contractId?: string): Promise<{ tenant_id: string; definition: ContractDefinition }[]> {
  return em.execute<{ tenant_id: string; definition: ContractDefinition }[]>(
    `SELECT tenant_id, definition FROM contract_versions WHERE tenant_id IN (SELECT jsonb_array_elements_text(?::jsonb)) ${contractId ? 'AND contract_id = ?' : ''}
     ORDER BY contract_id, string_to_array(version, '.')::int[]`,
    contractId ? [JSON.stringify(owners), contractId] : [JSON.stringify(owners)],
  );
}
