// The workflow registry (seed 003): definitions from `workflows/<id>/<version>.json`
// (the platform's, registered at boot) and over the API (the caller's tenant's).
// Versions are insert-only; within a major version each must keep the phases,
// transitions and initial phase of the versions around it.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Ajv, type ErrorObject } from 'ajv';
import { AbcError } from '../domain/errors.js';
import { canonicalJson } from '../domain/hash.js';
import { PLATFORM_TENANT } from '../domain/ids.js';
import { compareSemver, majorOf } from '../domain/semver.js';
import { topologyOf, type StateMachineTopology } from '../domain/topology.js';
import { phaseMachine, WORKFLOW_SCHEMA, workflowBreaks, workflowProblems, type WorkflowDefinition } from '../domain/workflow.js';
import type { Logger } from '../runtime/log.js';
import { insertWorkflow, listWorkflows, workflowVersions, type StoredWorkflow } from '../store/workflow-store.js';

const validate = new Ajv({ strict: true, allErrors: false }).compile<WorkflowDefinition>(WORKFLOW_SCHEMA);

export interface RegisteredWorkflow {
  definition: WorkflowDefinition;
  /** The platform's, seen by every tenant (else the tenant's own). */
  platform: boolean;
}

export class Workflows {
  constructor(readonly em: () => EntityManager) {}

  /** Registers the files under `dir` (each `<workflow_id>/<version>.json`) as the platform's; a bad file is logged and skipped. */
  async boot(dir: string, log: Logger): Promise<number> {
    if (!existsSync(dir)) return 0;
    let count = 0;
    for (const sub of readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory())) {
      for (const file of readdirSync(join(dir, sub.name)).filter((f) => f.endsWith('.json'))) {
        try {
          await this.register(PLATFORM_TENANT, JSON.parse(readFileSync(join(dir, sub.name, file), 'utf8')));
          count++;
        } catch (error) {
          log.error({ err: error, file: join(sub.name, file) }, 'workflow file refused');
        }
      }
    }
    return count;
  }

  /**
   * Registers a version for a tenant (PLATFORM_TENANT: for every tenant). The
   * same content again is a no-op (`created: false`); other content under a
   * version the tenant sees is refused, and so is a version that is not
   * additive over its neighbours within its major version.
   */
  async register(tenantId: string, json: unknown): Promise<{ workflow: RegisteredWorkflow; created: boolean }> {
    const def = checked(json);
    const versions = await workflowVersions(this.em(), tenantId, def.workflow_id);
    const same = versions.find((v) => v.definition.version === def.version);
    if (same) return { workflow: identical(same, def), created: false };
    checkAdditive(def, versions.map((v) => v.definition));
    if (!(await insertWorkflow(this.em(), tenantId, def))) {
      // Another core registered this version first: the same content is fine.
      const raced = (await workflowVersions(this.em(), tenantId, def.workflow_id)).find((v) => v.definition.version === def.version)!;
      return { workflow: identical(raced, def), created: false };
    }
    return { workflow: { definition: def, platform: tenantId === PLATFORM_TENANT }, created: true };
  }

  /** A version the tenant sees, or the latest; WORKFLOW_NOT_FOUND otherwise. */
  async get(tenantId: string, workflowId: string, version?: string): Promise<RegisteredWorkflow> {
    const versions = await workflowVersions(this.em(), tenantId, workflowId);
    const found = version ? versions.find((v) => v.definition.version === version) : versions.at(-1);
    if (!found) {
      throw new AbcError('NOT_FOUND', {
        code: 'WORKFLOW_NOT_FOUND',
        message: `workflow ${workflowId}${version ? `@${version}` : ''} does not exist${versions.length ? `; known versions: ${versions.map((v) => v.definition.version).join(', ')}` : ''}`,
        retryable: false,
        details: { workflow_id: workflowId, ...(version && { version }) },
      });
    }
    return registered(found);
  }

  /** Every version the tenant sees. */
  async list(tenantId: string): Promise<RegisteredWorkflow[]> {
    return (await listWorkflows(this.em(), tenantId)).map(registered);
  }

  /** The phase machine of every version the tenant sees, for the observer's topology. */
  async topology(tenantId: string): Promise<StateMachineTopology[]> {
    return (await this.list(tenantId)).map((w) => topologyOf(phaseMachine(w.definition)));
  }
}

const registered = (w: StoredWorkflow): RegisteredWorkflow => ({ definition: w.definition, platform: w.tenant_id === PLATFORM_TENANT });

/** The definition, or INVALID_WORKFLOW naming where it is wrong. */
function checked(json: unknown): WorkflowDefinition {
  if (!validate(json)) {
    const e = validate.errors![0]!;
    throw invalid(pointerOf(e), `${pointerOf(e) || '/'} ${e.message ?? 'is invalid'}`);
  }
  const problem = workflowProblems(json)[0];
  if (problem) throw invalid(problem.pointer, `${problem.pointer} ${problem.message}`);
  return json;
}

function pointerOf(e: ErrorObject): string {
  if (e.keyword === 'required') return `${e.instancePath}/${(e.params as { missingProperty: string }).missingProperty}`;
  if (e.keyword === 'additionalProperties') return `${e.instancePath}/${(e.params as { additionalProperty: string }).additionalProperty}`;
  return e.instancePath;
}

const invalid = (pointer: string, message: string) =>
  new AbcError('INVALID_ARGUMENT', { code: 'INVALID_WORKFLOW', message, retryable: false, details: { pointer: `/definition${pointer}` } });

function identical(existing: StoredWorkflow, next: WorkflowDefinition): RegisteredWorkflow {
  if (canonicalJson(existing.definition) === canonicalJson(next)) return registered(existing);
  throw new AbcError('ALREADY_EXISTS', {
    code: 'WORKFLOW_VERSION_EXISTS',
    message: `workflow ${next.workflow_id}@${next.version} exists with different content; versions are immutable, register a new version`,
    retryable: false,
    details: { pointer: '/definition/version' },
  });
}

/** Within a major version, a version keeps what the one before it has, and the one after it keeps what it has. */
function checkAdditive(next: WorkflowDefinition, versions: WorkflowDefinition[]): void {
  const line = versions.filter((v) => majorOf(v.version) === majorOf(next.version));
  const before = line.filter((v) => compareSemver(v.version, next.version) < 0).at(-1);
  const after = line.find((v) => compareSemver(v.version, next.version) > 0);
  const changes = [...(before ? workflowBreaks(before, next) : []), ...(after ? workflowBreaks(next, after).map((c) => `against ${after.version}: ${c}`) : [])];
  if (!changes.length) return;
  throw new AbcError('FAILED_PRECONDITION', {
    code: 'WORKFLOW_NOT_ADDITIVE',
    message: `${next.workflow_id}@${next.version} is not additive over ${before?.version ?? after?.version}: ${changes[0]}${changes.length > 1 ? ` (and ${changes.length - 1} more)` : ''}; breaking changes need a new major version`,
    retryable: false,
    details: { changes: changes.slice(0, 20), pointer: '/definition' },
  });
}
