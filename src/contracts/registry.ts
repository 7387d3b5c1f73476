// The contract registry: every contract version with its seed JSON Schemas,
// from folders (`<group>/<name>/<version>/`, ABC's own and each pack's) and
// from runtime registration. Requests and every response ABC emits are
// validated with ajv (draft 2020-12, with formats).
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { envelopeSchemas } from './envelopes.js';
import { compareSemver } from '../domain/semver.js';

import { SCHEMA_KINDS, type ContractDefinition, type ContractManifest, type ContractVersion, type SchemaKind, type Validation, type Violation } from '../domain/contract.js';

export type { ContractDefinition, ContractManifest, ContractVersion, SchemaKind, Validation, Violation };
export const SCHEMA_FILES = SCHEMA_KINDS;

/** A definition that cannot be a contract version; `pointer` locates the problem in it. */
export class ContractDefinitionError extends Error {
  constructor(message: string, readonly pointer: string) {
    super(message);
  }
}

const ID = /^[a-z0-9][a-z0-9._-]*(:[a-z0-9][a-z0-9._-]*)?$/;
const SEMVER = /^\d+\.\d+\.\d+$/;

interface Compiled {
  version: ContractVersion;
  request: ValidateFunction;
  responses: Map<SchemaKind, ValidateFunction>;
}

export class ContractRegistry {
  readonly #versions = new Map<string, Compiled>();

  /** Loads every `<group>/<name>/<version>/contract.json` under each root. */
  static load(roots: string | readonly string[]): ContractRegistry {
    const registry = new ContractRegistry();
    const seen = new Map<string, string>();
    for (const root of typeof roots === 'string' ? [roots] : roots) {
      for (const dir of contractDirs(root)) {
        const def = readDefinition(dir);
        const key = keyOf(def.contract_id, def.version);
        if (seen.has(key)) throw new Error(`contract ${key} is defined twice: in ${seen.get(key)} and in ${dir}`);
        seen.set(key, dir);
        registry.add(def, 'file');
      }
    }
    return registry;
  }

  /** Compiles a definition without adding it; throws ContractDefinitionError. */
  static compile(def: ContractDefinition, source: ContractVersion['source']): Compiled {
    if (!def || typeof def !== 'object') throw new ContractDefinitionError('a contract definition is a JSON object', '');
    for (const field of ['contract_id', 'version', 'intent'] as const) {
      if (typeof def[field] !== 'string' || !def[field]) throw new ContractDefinitionError(`${field} is required`, `/${field}`);
    }
    if (!ID.test(def.contract_id) || def.contract_id.length > 128) throw new ContractDefinitionError('contract_id is lowercase GROUP:NAME (letters, digits, . _ -), at most 128 characters', '/contract_id');
    if (!SEMVER.test(def.version)) throw new ContractDefinitionError(`version ${def.version} is not MAJOR.MINOR.PATCH`, '/version');
    if (!/^[a-z][a-z0-9_]{0,127}$/.test(def.intent)) throw new ContractDefinitionError('intent is snake_case', '/intent');
    if (def.description !== undefined && (typeof def.description !== 'string' || def.description.length > 2000)) throw new ContractDefinitionError('description is a string of at most 2000 characters', '/description');
    if (!def.schemas || typeof def.schemas !== 'object' || Array.isArray(def.schemas)) throw new ContractDefinitionError('schemas is an object of JSON Schemas by kind', '/schemas');
    const stray = Object.keys(def.schemas).find((k) => !(SCHEMA_FILES as readonly string[]).includes(k));
    if (stray) throw new ContractDefinitionError(`schemas.${stray} is not one of ${SCHEMA_FILES.join(', ')}`, `/schemas/${stray}`);
    for (const kind of SCHEMA_FILES) {
      const schema = def.schemas[kind];
      if (schema !== undefined && (!schema || typeof schema !== 'object' || Array.isArray(schema))) throw new ContractDefinitionError(`schemas.${kind} is a JSON Schema object`, `/schemas/${kind}`);
    }
    for (const kind of ['request', 'result'] as const) {
      const schema = def.schemas?.[kind];
      if (!schema || typeof schema !== 'object' || Array.isArray(schema)) throw new ContractDefinitionError(`schemas.${kind} is required`, `/schemas/${kind}`);
      if (typeof schema.$id !== 'string' || !schema.$id) throw new ContractDefinitionError(`schemas.${kind} needs an $id`, `/schemas/${kind}/$id`);
    }
    const schemas = { ...envelopeSchemas(def), ...def.schemas } as Record<SchemaKind, Record<string, unknown>>;
    const ids = new Set<string>();
    for (const kind of SCHEMA_FILES) {
      const id = String(schemas[kind].$id ?? '');
      if (!id || ids.has(id)) throw new ContractDefinitionError(`schemas.${kind} needs its own $id`, `/schemas/${kind}/$id`);
      ids.add(id);
    }
    // Requests get their declared defaults filled in; responses are checked as sent.
    const requestAjv = newAjv(true);
    const responseAjv = newAjv(false);
    const responses = new Map<SchemaKind, ValidateFunction>();
    let kind: SchemaKind = 'request';
    try {
      for (kind of SCHEMA_FILES) {
        requestAjv.addSchema(schemas[kind]);
        responseAjv.addSchema(schemas[kind]);
      }
      for (kind of SCHEMA_FILES) responses.set(kind, responseAjv.getSchema(String(schemas[kind].$id))!);
      kind = 'request';
      const request = requestAjv.getSchema(String(schemas.request.$id))!;
      const manifest = { contract_id: def.contract_id, version: def.version, intent: def.intent, ...(def.description && { description: def.description }) };
      return { version: { ...manifest, source, schemas }, request, responses };
    } catch (error) {
      throw new ContractDefinitionError(`schemas.${kind} is not a valid JSON Schema: ${(error as Error).message}`, `/schemas/${kind}`);
    }
  }

  /** Adds a version (replacing one of the same id and version). */
  add(def: ContractDefinition, source: ContractVersion['source']): ContractVersion {
    const compiled = ContractRegistry.compile(def, source);
    this.#versions.set(keyOf(def.contract_id, def.version), compiled);
    return compiled.version;
  }

  get(contractId: string, version: string): ContractVersion | undefined {
    return this.#versions.get(keyOf(contractId, version))?.version;
  }

  list(): ContractVersion[] {
    return [...this.#versions.values()].map((c) => c.version).sort((a, b) => a.contract_id.localeCompare(b.contract_id) || compareSemver(a.version, b.version));
  }

  /** Versions of one contract, oldest first. */
  versionsOf(contractId: string): ContractVersion[] {
    return this.list().filter((c) => c.contract_id === contractId);
  }

  /** Validates a request in place: declared defaults are filled in. */
  validateRequest(contract: ContractVersion, body: unknown): Validation {
    return verdict(this.#versions.get(keyOf(contract.contract_id, contract.version))!.request, body);
  }

  /** Validates a document ABC is about to send. */
  validateResponse(contract: ContractVersion, kind: SchemaKind, doc: unknown): Validation {
    return verdict(this.#versions.get(keyOf(contract.contract_id, contract.version))!.responses.get(kind)!, doc);
  }
}

/** A contract folder as a definition: contract.json, and the schema files present. */
function readDefinition(dir: string): ContractDefinition {
  const manifest = JSON.parse(readFileSync(join(dir, 'contract.json'), 'utf8')) as ContractManifest;
  const schemas = Object.fromEntries(
    SCHEMA_FILES.filter((kind) => existsSync(join(dir, `${kind}.schema.json`))).map((kind) => [kind, JSON.parse(readFileSync(join(dir, `${kind}.schema.json`), 'utf8'))]),
  ) as ContractDefinition['schemas'];
  return { ...manifest, schemas };
}

function newAjv(useDefaults: boolean): Ajv2020 {
  // The seed schemas carry annotations (defaults inside oneOf) that strict mode rejects.
  const ajv = new Ajv2020({ allErrors: true, strict: false, useDefaults });
  (addFormats as unknown as (a: Ajv2020) => void)(ajv);
  return ajv;
}

function verdict(validate: ValidateFunction, doc: unknown): Validation {
  if (validate(doc)) return { ok: true };
  return { ok: false, violations: rankViolations(validate.errors ?? []) };
}

/**
 * Turns ajv errors into violations, most precise first: the deepest pointer
 * wins, and the summary errors of `oneOf` branches come last.
 */
export function rankViolations(errors: ErrorObject[]): Violation[] {
  const seen = new Set<string>();
  const violations: (Violation & { depth: number; summary: boolean })[] = [];
  for (const e of errors) {
    const pointer = pointerOf(e);
    const message = `${pointer || '/'} ${e.message ?? 'is invalid'}${allowedValues(e)}`;
    if (seen.has(message)) continue;
    seen.add(message);
    const summary = e.keyword === 'oneOf' || e.keyword === 'anyOf' || e.keyword === 'if';
    violations.push({ pointer, keyword: e.keyword, message, depth: pointer.split('/').length, summary });
  }
  // Among equally deep errors, a broken value says more than a stray or missing key.
  const weight = (k: string) => (k === 'required' ? 2 : k === 'additionalProperties' ? 1 : 0);
  violations.sort((a, b) => Number(a.summary) - Number(b.summary) || b.depth - a.depth || weight(a.keyword) - weight(b.keyword));
  return violations.map(({ pointer, keyword, message }) => ({ pointer, keyword, message }));
}

function pointerOf(e: ErrorObject): string {
  const p = e.params as Record<string, unknown>;
  if (e.keyword === 'required') return `${e.instancePath}/${escapePointer(String(p.missingProperty))}`;
  if (e.keyword === 'additionalProperties') return `${e.instancePath}/${escapePointer(String(p.additionalProperty))}`;
  return e.instancePath;
}

function allowedValues(e: ErrorObject): string {
  const p = e.params as Record<string, unknown>;
  if (e.keyword === 'enum') return `: ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
  if (e.keyword === 'const') return `: ${JSON.stringify(p.allowedValue)}`;
  return '';
}

const escapePointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

export const keyOf = (contractId: string, version: string) => `${contractId}@${version}`;

function contractDirs(root: string): string[] {
  if (!existsSync(root)) return [];
  const found: string[] = [];
  const walk = (dir: string, depth: number) => {
    if (existsSync(join(dir, 'contract.json'))) found.push(dir);
    if (depth === 0) return;
    for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) walk(join(dir, entry.name), depth - 1);
  };
  walk(root, 3);
  return found.sort();
}
