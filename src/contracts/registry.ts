// The contract registry: one folder per contract id and version under
// `contracts/`, holding the seed's JSON Schemas. Requests and every response
// ABC emits are validated with ajv (draft 2020-12, with formats).
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

export const SCHEMA_FILES = ['request', 'submit-response', 'result', 'poll-response', 'error'] as const;
export type SchemaKind = (typeof SCHEMA_FILES)[number];

export interface ContractManifest {
  contract_id: string;
  version: string;
  intent: string;
  description?: string;
}

export interface ContractVersion extends ContractManifest {
  dir: string;
  schemas: Record<SchemaKind, Record<string, unknown>>;
}

/** One violation, located by a JSON pointer into the validated document. */
export interface Violation {
  pointer: string;
  keyword: string;
  message: string;
}

export type Validation = { ok: true } | { ok: false; violations: Violation[] };

export class ContractRegistry {
  readonly #versions = new Map<string, ContractVersion>();
  readonly #requests = new Map<string, ValidateFunction>();
  readonly #responses = new Map<string, ValidateFunction>();

  /** Loads every `<group>/<name>/<version>/contract.json` under `root`. */
  static load(root: string): ContractRegistry {
    const registry = new ContractRegistry();
    for (const dir of contractDirs(root)) registry.#add(dir);
    return registry;
  }

  #add(dir: string): void {
    const manifest = JSON.parse(readFileSync(join(dir, 'contract.json'), 'utf8')) as ContractManifest;
    const schemas = Object.fromEntries(
      SCHEMA_FILES.map((kind) => [kind, JSON.parse(readFileSync(join(dir, `${kind}.schema.json`), 'utf8'))]),
    ) as ContractVersion['schemas'];
    const key = keyOf(manifest.contract_id, manifest.version);
    // Requests get their declared defaults filled in; responses are checked as sent.
    const requestAjv = newAjv(true);
    const responseAjv = newAjv(false);
    for (const kind of SCHEMA_FILES) {
      requestAjv.addSchema(schemas[kind]);
      responseAjv.addSchema(schemas[kind]);
    }
    this.#requests.set(key, requestAjv.getSchema(String(schemas.request.$id))!);
    for (const kind of SCHEMA_FILES) {
      this.#responses.set(`${key}#${kind}`, responseAjv.getSchema(String(schemas[kind].$id))!);
    }
    this.#versions.set(key, { ...manifest, dir, schemas });
  }

  get(contractId: string, version: string): ContractVersion | undefined {
    return this.#versions.get(keyOf(contractId, version));
  }

  list(): ContractVersion[] {
    return [...this.#versions.values()];
  }

  /** Versions of one contract, oldest first. */
  versionsOf(contractId: string): ContractVersion[] {
    return this.list()
      .filter((c) => c.contract_id === contractId)
      .sort((a, b) => compareSemver(a.version, b.version));
  }

  /** Validates a request in place: declared defaults are filled in. */
  validateRequest(contract: ContractVersion, body: unknown): Validation {
    return verdict(this.#requests.get(keyOf(contract.contract_id, contract.version))!, body);
  }

  /** Validates a document ABC is about to send. */
  validateResponse(contract: ContractVersion, kind: SchemaKind, doc: unknown): Validation {
    return verdict(this.#responses.get(`${keyOf(contract.contract_id, contract.version)}#${kind}`)!, doc);
  }
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

const keyOf = (contractId: string, version: string) => `${contractId}@${version}`;

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

/** Orders `MAJOR.MINOR.PATCH` versions numerically. */
export function compareSemver(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) if ((pa[i] ?? 0) !== (pb[i] ?? 0)) return (pa[i] ?? 0) - (pb[i] ?? 0);
  return 0;
}
