// Every contract version this deployment knows: the platform's (shipped in
// folders and packs, or registered for the platform) and each tenant's own,
// registered through the API on any core (contract_versions). A tenant sees
// the platform's and its own. Registration is insert-only, and a new version
// must be additive within its major version (compat.ts).
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError } from '../domain/errors.js';
import { PLATFORM_TENANT } from '../domain/ids.js';
import { compareSemver } from '../domain/semver.js';
import { canonicalJson } from '../domain/hash.js';
import type { ContractLookup } from '../ports/contracts.js';
import { insertContractVersion, readContractVersions } from '../store/contract-versions.js';
import { breakingChanges } from './compat.js';
import { ContractDefinitionError, ContractRegistry, type ContractDefinition, type ContractVersion, type SchemaKind, type Validation } from './registry.js';

export class ContractCatalog implements ContractLookup {
  /** Each tenant's own registered versions; the platform's are in `registry`. */
  readonly #tenants = new Map<string, ContractRegistry>();
  /** The registry that compiled a tenant's version, for its validators. */
  readonly #owned = new WeakMap<ContractVersion, ContractRegistry>();

  constructor(
    /** The platform's versions: folders, packs, and those registered for the platform. */
    readonly registry: ContractRegistry,
    readonly em: () => EntityManager,
  ) {}

  /** Loads the platform's versions registered through the API. */
  async boot(): Promise<number> {
    const rows = await readContractVersions(this.em(), [PLATFORM_TENANT]);
    for (const row of rows) this.#adopt(row.tenant_id, row.definition);
    return rows.length;
  }

  /** A version the tenant sees: the platform's, else its own. */
  async find(tenantId: string, contractId: string, version: string): Promise<ContractVersion | undefined> {
    const known = this.#known(tenantId, contractId, version);
    if (known) return known;
    // Registered on another core since this one last looked.
    await this.#load(tenantId, contractId);
    return this.#known(tenantId, contractId, version);
  }

  async versionsOf(tenantId: string, contractId: string): Promise<ContractVersion[]> {
    await this.#load(tenantId, contractId);
    return this.#visible(tenantId).filter((c) => c.contract_id === contractId);
  }

  /** The versions the tenant sees, by id then version. */
  async list(tenantId: string, contractId?: string): Promise<ContractVersion[]> {
    if (contractId) return this.versionsOf(tenantId, contractId);
    await this.#load(tenantId);
    return this.#visible(tenantId);
  }

  /** Whether a version is the platform's (every tenant sees it). */
  isPlatform(contract: ContractVersion): boolean {
    return !this.#owned.has(contract);
  }

  validateRequest(contract: ContractVersion, body: unknown): Validation {
    return (this.#owned.get(contract) ?? this.registry).validateRequest(contract, body);
  }

  validateResponse(contract: ContractVersion, kind: SchemaKind, doc: unknown): Validation {
    return (this.#owned.get(contract) ?? this.registry).validateResponse(contract, kind, doc);
  }

  /**
   * Registers a version for a tenant (PLATFORM_TENANT: for the platform). It
   * extends what the tenant sees: the identical version again is a no-op
   * (`created: false`), intents stay unique and versions additive across the
   * platform's and the tenant's own.
   */
  async register(tenantId: string, def: ContractDefinition): Promise<{ contract: ContractVersion; created: boolean }> {
    let next: ContractVersion;
    try {
      next = ContractRegistry.compile(def, 'api').version;
    } catch (error) {
      if (error instanceof ContractDefinitionError) throw new AbcError('INVALID_ARGUMENT', { code: 'INVALID_CONTRACT', message: error.message, retryable: false, details: { pointer: `/definition${error.pointer}` } });
      throw error;
    }
    const same = await this.find(tenantId, next.contract_id, next.version);
    if (same) return { contract: this.#identical(same, next), created: false };
    await this.#checkIntent(tenantId, next);
    this.#checkAdditive(next, await this.versionsOf(tenantId, next.contract_id));
    const inserted = await insertContractVersion(this.em(), tenantId, { contract_id: next.contract_id, version: next.version, intent: next.intent, ...(next.description && { description: next.description }), schemas: next.schemas });
    // Another core registered this version first: the same content is fine.
    if (!inserted) return { contract: this.#identical((await this.find(tenantId, next.contract_id, next.version))!, next), created: false };
    return { contract: this.#adopt(tenantId, next), created: true };
  }

  #known(tenantId: string, contractId: string, version: string): ContractVersion | undefined {
    return this.registry.get(contractId, version) ?? this.#tenants.get(tenantId)?.get(contractId, version);
  }

  /** The platform's versions, then the tenant's own under any id and version the platform has not taken. */
  #visible(tenantId: string): ContractVersion[] {
    const platform = this.registry.list();
    const own = tenantId === PLATFORM_TENANT ? [] : (this.#tenants.get(tenantId)?.list() ?? []).filter((c) => !this.registry.get(c.contract_id, c.version));
    return [...platform, ...own].sort((a, b) => a.contract_id.localeCompare(b.contract_id) || compareSemver(a.version, b.version));
  }

  async #load(tenantId: string, contractId?: string): Promise<void> {
    for (const row of await readContractVersions(this.em(), [PLATFORM_TENANT, tenantId], contractId)) this.#adopt(row.tenant_id, row.definition);
  }

  #adopt(tenantId: string, def: ContractDefinition): ContractVersion {
    const platform = tenantId === PLATFORM_TENANT;
    let registry = platform ? this.registry : this.#tenants.get(tenantId);
    if (!registry) this.#tenants.set(tenantId, (registry = new ContractRegistry()));
    const known = registry.get(def.contract_id, def.version);
    if (known) return known;
    const added = registry.add(def, 'api');
    if (!platform) this.#owned.set(added, registry);
    return added;
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

  /** An intent selects the assemblies that run it: among what a tenant sees, one contract owns it. */
  async #checkIntent(tenantId: string, next: ContractVersion): Promise<void> {
    const owner = (await this.list(tenantId)).find((c) => c.intent === next.intent && c.contract_id !== next.contract_id);
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
