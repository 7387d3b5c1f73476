// The contract port: how the engine finds a ticket's contract version and
// checks a result against it, without depending on the contract plane.
import type { ContractVersion, SchemaKind, Validation } from '../domain/contract.js';

export interface ContractLookup {
  /** A registered version, wherever it was registered (a folder, a pack, or the API on any core). */
  find(contractId: string, version: string): Promise<ContractVersion | undefined>;
  validateResponse(contract: ContractVersion, kind: SchemaKind, doc: unknown): Validation;
}
