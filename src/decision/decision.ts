// The decision plane: the assembly registry and the compiler of frozen plans.
// It never executes anything. Plans and assembly versions are insert-only
// (database triggers refuse updates).
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbcError } from '../domain/errors.js';
import { DEFAULT_TENANT } from '../access/principal.js';
import { PLATFORM_TENANT } from '../domain/ids.js';
import { newId } from '../runtime/new-id.js';
import { TtlCache } from '../runtime/ttl-cache.js';
import { insertAssembly, insertPlan, latestAssembly, planInsert, listAssemblies, readAssembly, readPlan } from '../store/assembly-store.js';
import type { Logger } from '../runtime/log.js';
import { Ajv } from 'ajv';
import { canonicalJson } from '../domain/hash.js';
import { ENGINE_SETTINGS_SCHEMA } from '../domain/engine-policy.js';
import { AssemblyError, bodyOf, checkAssembly, compilePlan, mergeLocal, type AssemblyDef, type PlanBody, type PlanInput } from './planner.js';

const checkEngineSection = new Ajv({ strict: false, allErrors: false }).compile(ENGINE_SETTINGS_SCHEMA);


export interface FrozenPlanDoc extends PlanBody {
  plan_id: string;
  plan_hash: string;
  created_at: number;
  replaces_plan_id?: string;
  metadata: Record<string, unknown>;
}

export interface PlanRequest extends PlanInput {
  /** Whose tools the plan may use. */
  tenantId: string;
  executionId?: string;
  /** Pins an assembly version; empty picks the latest for the intent. */
  assemblyVersion?: string;
}

/** How long, and for how many tenants' intents, what an intent resolves to is kept without a change heard of. */
const RESOLVED_KEPT_MS = 5 * 60_000;
const RESOLVED_KEPT = 10_000;

/** Plans kept in memory; they are immutable, so a cached plan is never stale. */
const PLAN_CACHE_SIZE = 2000;

export class Decision {
  // Assembly versions and plans never change once stored: reads of them are cached
  // (assemblies by the tenant that asked: a tenant cannot later take an id and version it sees).
  readonly #assemblies = new Map<string, AssemblyDef>();
  readonly #plans = new Map<string, FrozenPlanDoc>();
  /** The assembly each tenant's intent resolves to, until a version is stored anywhere (forgetResolved). */
  readonly #resolved = new TtlCache<AssemblyDef>(RESOLVED_KEPT_MS, RESOLVED_KEPT);

  constructor(
    readonly em: () => EntityManager,
    /** The capabilities the control plane grants right now. */
    readonly granted: (tenantId: string) => Promise<ReadonlySet<string>>,
  ) {}

  /** Registers the assembly files under `dir` (each `<intent>/<version>.json`) as the platform's; existing versions are kept. */
  async boot(dir: string, log: Logger): Promise<number> {
    if (!existsSync(dir)) return 0;
    let count = 0;
    for (const sub of readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory())) {
      for (const file of readdirSync(join(dir, sub.name)).filter((f) => f.endsWith('.json'))) {
        const def = JSON.parse(readFileSync(join(dir, sub.name, file), 'utf8')) as AssemblyDef;
        try {
          await this.register(PLATFORM_TENANT, def);
          count++;
        } catch (error) {
          log.error({ err: error, file: join(sub.name, file) }, 'assembly file refused');
        }
      }
    }
    return count;
  }

  /**
   * Stores a new assembly version of a tenant (PLATFORM_TENANT: the platform's).
   * Registering content identical to a version the tenant sees is a no-op;
   * different content under that id and version is refused.
   */
  async register(tenantId: string, def: AssemblyDef): Promise<AssemblyDef> {
    try {
      checkAssembly(def);
      if (def.engine !== undefined && !checkEngineSection(def.engine)) {
        const e = checkEngineSection.errors![0]!;
        throw new AssemblyError(`engine${e.instancePath.replaceAll('/', '.')} ${e.message}`, `/assembly/engine${e.instancePath}`);
      }
    } catch (error) {
      if (error instanceof AssemblyError) throw new AbcError('INVALID_ARGUMENT', { code: 'INVALID_ASSEMBLY', message: error.message, details: { pointer: error.pointer } });
      throw error;
    }
    const seen = await this.get(tenantId, def.assembly_id, def.version);
    if (!seen && (await insertAssembly(this.em(), tenantId, def))) {
      this.forgetResolved();
      return def;
    }
    // Seen already, or another core stored it first.
    const existing = seen ?? (await this.get(tenantId, def.assembly_id, def.version));
    if (existing && canonicalJson(existing) === canonicalJson(def)) return existing;
    throw new AbcError('ALREADY_EXISTS', {
      code: 'ASSEMBLY_VERSION_EXISTS',
      message: `assembly ${def.assembly_id}@${def.version} exists with different content; versions are immutable, register a new version`,
      retryable: false,
    });
  }

  /** A version the tenant sees: its own, else the platform's. */
  async get(tenantId: string, assemblyId: string, version: string): Promise<AssemblyDef | undefined> {
    const key = `${tenantId}|${assemblyId}@${version}`;
    const cached = this.#assemblies.get(key);
    if (cached) return cached;
    const found = await readAssembly<AssemblyDef>(this.em(), tenantId, assemblyId, version);
    if (found) this.#assemblies.set(key, found);
    return found;
  }

  /** The versions the tenant sees; `platform` marks the platform's. */
  async list(tenantId: string, intent?: string): Promise<{ assembly: AssemblyDef; platform: boolean }[]> {
    return (await listAssemblies<AssemblyDef>(this.em(), tenantId, intent)).map((r) => ({ assembly: r.definition, platform: r.tenant_id === PLATFORM_TENANT }));
  }

  /** The assembly for an intent: a pinned version, else the highest version; the tenant's own win over the platform's. */
  async resolve(tenantId: string, intent: string, version?: string): Promise<AssemblyDef> {
    // A failed lookup (no assembly) is not kept.
    return this.#resolved.getOrLoad(`${tenantId}|${intent}|${version ?? ''}`, async () => {
      const found = await latestAssembly<AssemblyDef>(this.em(), tenantId, intent, version);
      if (found) return found;
      throw new AbcError('FAILED_PRECONDITION', {
        code: 'NO_ASSEMBLY',
        category: 'EXECUTION',
        message: `no assembly is registered for intent ${intent}${version ? ` at version ${version}` : ''}`,
        retryable: false,
      });
    });
  }

  /**
   * Drops what intents resolved to: a version was stored (here, or on any
   * core: ASSEMBLIES_CHANNEL), or the listener reconnected and may have missed that.
   */
  forgetResolved(): void {
    this.#resolved.clear();
  }

  /** Compiles and stores a frozen plan. */
  async plan(req: PlanRequest, tx?: EntityManager): Promise<FrozenPlanDoc> {
    const assembly = await this.resolve(req.tenantId, req.intent, req.assemblyVersion);
    const { body, hash } = await this.compile(assembly, req, new Set(), req.tenantId);
    return this.freeze(body, hash, req.executionId, { input: planInput(req), tenant_id: req.tenantId }, undefined, tx);
  }

  /** Compiles without storing for a tenant's capabilities; `avoid` names capabilities to replace by their fallbacks. */
  async compile(assembly: AssemblyDef, input: PlanInput, avoid: ReadonlySet<string>, tenantId: string): Promise<{ body: PlanBody; hash: string }> {
    return compilePlan(assembly, input, await this.granted(tenantId), avoid);
  }

  /**
   * A successor plan after a failure; `avoid` names capabilities that failed.
   * LOCAL recompiles the same assembly version and changes only the failed
   * step and what depends on it; GLOBAL recompiles everything from the
   * original input with the latest assembly version.
   */
  async replan(
    planId: string,
    scope: 'LOCAL' | 'GLOBAL',
    failedStepId: string,
    reason: Record<string, unknown> | undefined,
    tenantId: string,
    avoid: ReadonlySet<string> = new Set(),
    tx: EntityManager = this.em(),
  ): Promise<FrozenPlanDoc> {
    const previous = await this.getPlan(planId, tx);
    // Another tenant's plan does not exist for this one.
    if (!previous || (previous.metadata.tenant_id ?? DEFAULT_TENANT) !== tenantId) throw new AbcError('NOT_FOUND', { code: 'PLAN_NOT_FOUND', message: `plan ${planId} does not exist`, retryable: false });
    const input = previous.metadata.input as PlanInput | undefined;
    const replan = { scope, failed_step_id: failedStepId, ...(reason && { error: reason }), ...(avoid.size && { avoid: [...avoid].sort() }) };
    const executionId = previous.metadata.execution_id as string | undefined;
    if (scope === 'GLOBAL' && input) {
      const { body, hash } = await this.compile(await this.resolve(tenantId, input.intent), input, avoid, tenantId);
      return this.freeze(body, hash, executionId, { ...previous.metadata, replan }, planId, tx);
    }
    if (failedStepId && !previous.steps.some((s) => s.id === failedStepId)) {
      throw new AbcError('INVALID_ARGUMENT', { code: 'UNKNOWN_STEP', message: `plan ${planId} has no step ${failedStepId}`, details: { pointer: '/failed_step_id' } });
    }
    const assembly = input && failedStepId ? await this.get(tenantId, previous.assembly_id, previous.assembly_version) : undefined;
    const { body, hash } = assembly && input ? mergeLocal(previous, (await this.compile(assembly, input, avoid, tenantId)).body, failedStepId) : { body: bodyOf(previous), hash: previous.plan_hash };
    return this.freeze(body, hash, executionId, { ...previous.metadata, replan }, planId, tx);
  }

  async getPlan(planId: string, em: EntityManager = this.em()): Promise<FrozenPlanDoc | undefined> {
    const cached = this.#plans.get(planId);
    if (cached) return cached;
    const plan = await readPlan<FrozenPlanDoc>(em, planId);
    if (plan) this.#remember(plan);
    return plan;
  }

  #remember(plan: FrozenPlanDoc): void {
    if (this.#plans.size >= PLAN_CACHE_SIZE) this.#plans.delete(this.#plans.keys().next().value!);
    this.#plans.set(plan.plan_id, plan);
  }

  /** Stores a plan; it is immutable from here on. */
  async freeze(body: PlanBody, hash: string, executionId: string | undefined, metadata: Record<string, unknown>, replaces?: string, em: EntityManager = this.em()): Promise<FrozenPlanDoc> {
    const { doc } = this.frozen(body, hash, executionId, metadata, replaces);
    await insertPlan(em, doc, executionId, replaces);
    return doc;
  }

  /** A plan frozen, and its INSERT for the statement that commits it with other records. */
  frozen(body: PlanBody, hash: string, executionId: string | undefined, metadata: Record<string, unknown>, replaces?: string): { doc: FrozenPlanDoc; insert: { sql: string; params: unknown[] } } {
    const doc: FrozenPlanDoc = {
      ...body,
      plan_id: newId('plan'),
      plan_hash: hash,
      created_at: Date.now(),
      ...(replaces && { replaces_plan_id: replaces }),
      metadata: { ...metadata, ...(executionId && { execution_id: executionId }) },
    };
    // A plan that never commits is never asked for: its id is nowhere else.
    this.#remember(doc);
    return { doc, insert: planInsert(doc, executionId, replaces) };
  }
}

export const planInput = (req: PlanInput): PlanInput => ({
  intent: req.intent,
  context: req.context,
  ...(req.contract && { contract: req.contract }),
  ...(req.input && { input: req.input }),
  ...(req.output_spec && { output_spec: req.output_spec }),
});
