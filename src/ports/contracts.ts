// The contract port: how the engine finds a ticket's contract version and
// checks a result against it, without depending on the contract plane.
import type { ContractVersion, SchemaKind, Validation } from '../domain/contract.js';

export interface ContractLookup {
  /** A version the tenant sees: the platform's (a folder, a pack, or registered for the platform) or its own, registered on any core. */
  find(tenantId: string, contractId: string, version: string): Promise<ContractVersion | undefined>;
  validateResponse(contract: ContractVersion, kind: SchemaKind, doc: unknown): Validation;
}
