// The policies in force. The platform's comes from ABC_POLICY_FILE (reloaded
// when the file changes) or is stored over the API; the document with the
// higher `version` wins. Each tenant may store its own, which can only tighten
// the platform's (domain/policy.ts `decide`). Every core reloads stored
// policies on their notification. A document that fails its schema is refused
// with a clear error; the old policy stays.
import { readFile } from 'node:fs/promises';
import { unwatchFile, watchFile } from 'node:fs';
import { Ajv } from 'ajv';
import { badPattern } from '../domain/conditions.js';
import { duplicateRuleIds, POLICY_SCHEMA, type PolicyDocument, type PolicyScope, type PolicySet } from '../domain/policy.js';
import type { Logger } from '../runtime/log.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { invalidRequest } from '../domain/errors.js';
import type { EventBus } from '../store/event-bus.js';
import { activePolicies, storePolicy, type StoredPolicy } from '../store/policies.js';
import { PLATFORM_TENANT } from '../domain/ids.js';

/** With no policy file every call is allowed. */
export const ALLOW_ALL: PolicyDocument = { version: 1, rules: [], default: 'allow' };

const validate = new Ajv({ strict: true, allErrors: false }).compile(POLICY_SCHEMA);

/** Parses and checks a policy document; the error names the place that is wrong. */
export function parsePolicy(text: string): { ok: true; policy: PolicyDocument } | { ok: false; error: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { ok: false, error: `not valid JSON: ${(error as Error).message}` };
  }
  return checkPolicy(json);
}

/** Checks a policy document given as JSON. */
export function checkPolicy(json: unknown): { ok: true; policy: PolicyDocument } | { ok: false; error: string } {
  if (!validate(json)) {
    const e = validate.errors![0]!;
    return { ok: false, error: `${e.instancePath || '(document)'} ${e.message}` };
  }
  const policy = json as PolicyDocument;
  const duplicates = duplicateRuleIds(policy);
  if (duplicates.length) return { ok: false, error: `duplicate rule ids: ${duplicates.join(', ')}` };
  for (const rule of policy.rules) {
    const bad = badPattern(rule.when?.args ?? {});
    if (bad) return { ok: false, error: `rule ${rule.id}: args.${bad}.matches is not a valid regular expression` };
  }
  return { ok: true, policy };
}

/** Where the policies stored over the API live. */
export interface PolicyDb {
  em: () => EntityManager;
  bus: EventBus;
}

export class PolicyStore {
  #policy: PolicyDocument;
  /** Active stored policies by tenant; the platform's is under `*`. */
  #stored = new Map<string, StoredPolicy>();
  readonly #file: string | undefined;
  readonly #log: Logger;
  readonly #db: PolicyDb | undefined;
  #unwake: (() => void) | undefined;
  /** The stored policies' reads, one after another; close() waits for them. */
  #reloads: Promise<void> = Promise.resolve();
  #reloadQueued = false;
  #closed = false;

  private constructor(policy: PolicyDocument, file: string | undefined, log: Logger, db: PolicyDb | undefined) {
    this.#policy = policy;
    this.#file = file;
    this.#log = log;
    this.#db = db;
  }

  /** Loads the policy file (a bad one stops the boot) and the stored policies, and follows both. */
  static async open(file: string | undefined, log: Logger, db?: PolicyDb, pollMs = 500): Promise<PolicyStore> {
    const store = new PolicyStore(ALLOW_ALL, file, log.child({ component: 'policy' }), db);
    if (db) {
      // Before migrations the table may be missing: the file (or allow-all) holds until a reload.
      await store.#reloadStored().catch((error) => store.#log.warn({ err: error }, 'no stored policy yet'));
      // A notification, or a reconnect after which one may have been missed.
      store.#unwake = db.bus.onWake('policy', () => store.#queueReload());
    }
    if (!file) return store;
    const result = await store.reload();
    if (!result.ok) throw new Error(`ABC_POLICY_FILE ${file}: ${result.error}`);
    watchFile(file, { interval: pollMs, persistent: false }, () => void store.reload());
    return store;
  }

  /** The platform policy in force: the file's or the stored one, whichever has the higher version. */
  platform(): PolicyDocument {
    const stored = this.#stored.get(PLATFORM_TENANT);
    return stored && stored.version >= this.#policy.version ? stored.document : this.#policy;
  }

  /** The policies a tenant is under: the platform's and its own. */
  forTenant(tenantId: string): PolicySet {
    const own = tenantId === PLATFORM_TENANT ? undefined : this.#stored.get(tenantId)?.document;
    return { platform: this.platform(), ...(own && { tenant: own }) };
  }

  /** A tenant's own stored policy, or the platform's in force and where it came from. */
  describe(scope: PolicyScope, tenantId: string): { document?: PolicyDocument; source: 'api' | 'file' | 'default' | 'none' } {
    if (scope === 'tenant') {
      const own = this.#stored.get(tenantId)?.document;
      return own ? { document: own, source: 'api' } : { source: 'none' };
    }
    const document = this.platform();
    return { document, source: document === this.#stored.get(PLATFORM_TENANT)?.document ? 'api' : this.#file ? 'file' : 'default' };
  }

  /** Stores a tenant's new policy (`*`: the platform's); every core takes it. Its version must be above every one the tenant stored. */
  async put(tenantId: string, json: unknown): Promise<StoredPolicy> {
    if (!this.#db) throw new Error('policies are not stored in this process');
    const checked = checkPolicy(json);
    if (!checked.ok) throw invalidRequest(`the policy is not valid: ${checked.error}`, 'policy');
    const stored = await this.#db.em().transactional((tx) => storePolicy(tx, tenantId, checked.policy));
    this.#stored.set(tenantId, stored);
    this.#log.info({ tenant_id: tenantId, version: stored.version, rules: stored.document.rules.length }, 'policy stored');
    return stored;
  }

  /**
   * One read after the one in flight, for any number of wakes meanwhile: two
   * reads at once could end out of order and keep the older policies.
   */
  #queueReload(): void {
    if (this.#closed || this.#reloadQueued) return;
    this.#reloadQueued = true;
    this.#reloads = this.#reloads.then(async () => {
      this.#reloadQueued = false;
      if (this.#closed) return;
      await this.#reloadStored().catch((error) => this.#log.error({ err: error }, 'stored policy reload failed'));
    });
  }

  async #reloadStored(): Promise<void> {
    const stored = await activePolicies(this.#db!.em());
    for (const [tenant, policy] of stored) {
      if (policy.version !== this.#stored.get(tenant)?.version) this.#log.info({ tenant_id: tenant, version: policy.version }, 'stored policy loaded');
    }
    this.#stored = stored;
  }

  /** Re-reads the file. On failure the active policy is kept and the error returned. */
  async reload(): Promise<{ ok: true } | { ok: false; error: string }> {
    if (!this.#file) return { ok: true };
    let text: string;
    try {
      text = await readFile(this.#file, 'utf8');
    } catch (error) {
      return this.#refuse(`cannot read the file: ${(error as Error).message}`);
    }
    const parsed = parsePolicy(text);
    if (!parsed.ok) return this.#refuse(parsed.error);
    this.#policy = parsed.policy;
    this.#log.info({ file: this.#file, rules: parsed.policy.rules.length }, 'policy loaded');
    return { ok: true };
  }

  #refuse(error: string): { ok: false; error: string } {
    this.#log.error({ file: this.#file, error }, 'policy refused; the previous policy stays active');
    return { ok: false, error };
  }

  /** Stops following, and waits for a read in flight: one that reached for the pool as it ends would hold it open. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#file) unwatchFile(this.#file);
    this.#unwake?.();
    await this.#reloads;
  }
}
