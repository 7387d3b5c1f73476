// Every contract version this deployment knows: those shipped in folders and
// packs, and those registered through the API on any core (contract_versions).
// Registration is insert-only, and a new version must be additive within its
// major version (compat.ts).
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError } from '../domain/errors.js';
import { canonicalJson } from '../domain/hash.js';
import type { ContractLookup } from '../ports/contracts.js';
import { insertContractVersion, readContractVersions } from '../store/contract-versions.js';
import { breakingChanges } from './compat.js';
import { compareSemver, ContractDefinitionError, ContractRegistry, type ContractDefinition, type ContractVersion, type SchemaKind, type Validation } from './registry.js';

export class ContractCatalog implements ContractLookup {
  constructor(
    readonly registry: ContractRegistry,
    readonly em: () => EntityManager,
  ) {}

  /** Loads the versions registered through the API. */
  async boot(): Promise<number> {
    const defs = await readContractVersions(this.em());
    for (const def of defs) this.#adopt(def);
    return defs.length;
  }

  async find(contractId: string, version: string): Promise<ContractVersion | undefined> {
    const known = this.registry.get(contractId, version);
    if (known) return known;
    // Registered on another core since this one last looked.
    await this.#load(contractId);
    return this.registry.get(contractId, version);
  }

  async versionsOf(contractId: string): Promise<ContractVersion[]> {
    await this.#load(contractId);
    return this.registry.versionsOf(contractId);
  }

  async list(contractId?: string): Promise<ContractVersion[]> {
    if (contractId) return this.versionsOf(contractId);
    await this.boot();
    return this.registry.list();
  }

  validateRequest(contract: ContractVersion, body: unknown): Validation {
    return this.registry.validateRequest(contract, body);
  }

  validateResponse(contract: ContractVersion, kind: SchemaKind, doc: unknown): Validation {
    return this.registry.validateResponse(contract, kind, doc);
  }

  /** Registers a version; the identical version again is a no-op (`created: false`). */
  async register(def: ContractDefinition): Promise<{ contract: ContractVersion; created: boolean }> {
    let next: ContractVersion;
    try {
      next = ContractRegistry.compile(def, 'api').version;
    } catch (error) {
      if (error instanceof ContractDefinitionError) throw new AbcError('INVALID_ARGUMENT', { code: 'INVALID_CONTRACT', message: error.message, retryable: false, details: { pointer: `/definition${error.pointer}` } });
      throw error;
    }
    const same = await this.find(next.contract_id, next.version);
    if (same) return { contract: this.#identical(same, next), created: false };
    await this.#checkIntent(next);
    this.#checkAdditive(next, await this.versionsOf(next.contract_id));
    const inserted = await insertContractVersion(this.em(), { contract_id: next.contract_id, version: next.version, intent: next.intent, ...(next.description && { description: next.description }), schemas: next.schemas });
    // Another core registered this version first: the same content is fine.
    if (!inserted) return { contract: this.#identical((await this.find(next.contract_id, next.version))!, next), created: false };
    return { contract: this.registry.add(next, 'api'), created: true };
  }

  async #load(contractId: string): Promise<void> {
    for (const def of await readContractVersions(this.em(), contractId)) this.#adopt(def);
  }

  #adopt(def: ContractDefinition): void {
    if (!this.registry.get(def.contract_id, def.version)) this.registry.add(def, 'api');
  }

  #identical(existing: ContractVersion, next: ContractVersion): ContractVersion {
    const content = (c: ContractVersion) => canonicalJson({ intent: c.intent, description: c.description ?? '', schemas: c.schemas });
    if (content(existing) === content(next)) return existing;
    throw new AbcError('ALREADY_EXISTS', {
      code: 'CONTRACT_VERSION_EXISTS',
      message: `contract ${next.contract_id}@${next.version} exists with different content; versions are immutable, register a new version`,
      retryable: false,
      details: { pointer: '/definition/version' },
    });
  }

  /** An intent selects the assemblies that run it: one contract owns it. */
  async #checkIntent(next: ContractVersion): Promise<void> {
    const owner = (await this.list()).find((c) => c.intent === next.intent && c.contract_id !== next.contract_id);
    if (owner) {
      throw new AbcError('ALREADY_EXISTS', { code: 'INTENT_TAKEN', message: `intent ${next.intent} belongs to contract ${owner.contract_id}`, retryable: false, details: { pointer: '/definition/intent' } });
    }
  }

  /** Within a major version, each version only adds to the one before it. */
  #checkAdditive(next: ContractVersion, versions: ContractVersion[]): void {
    const major = (v: string) => v.split('.')[0];
    const line = versions.filter((v) => major(v.version) === major(next.version));
    const before = line.filter((v) => compareSemver(v.version, next.version) < 0).at(-1);
    const after = line.find((v) => compareSemver(v.version, next.version) > 0);
    const changes = [...(before ? breakingChanges(before, next) : []), ...(after ? breakingChanges(next, after).map((c) => `against ${after.version}: ${c}`) : [])];
    if (before && before.intent !== next.intent) changes.unshift(`intent changed from ${before.intent} to ${next.intent}`);
    if (!changes.length) return;
    throw new AbcError('FAILED_PRECONDITION', {
      code: 'CONTRACT_NOT_ADDITIVE',
      message: `${next.contract_id}@${next.version} is not additive over ${before?.version ?? after?.version}: ${changes[0]}${changes.length > 1 ? ` (and ${changes.length - 1} more)` : ''}; breaking changes need a new major version`,
      retryable: false,
      details: { changes: changes.slice(0, 20), pointer: '/definition/schemas' },
    });
  }
}
