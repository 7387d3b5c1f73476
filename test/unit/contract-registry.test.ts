// The contract registry: the seed schemas as files, ajv 2020-12 validation, and
// additive evolution between versions.
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { breakingChanges } from '../../src/contracts/compat.js';
import { ContractRegistry, SCHEMA_FILES } from '../../src/contracts/registry.js';
import { request } from '../support/contracts.js';

const ROOT = path.resolve('packs/analyze-portfolio/contracts');
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'abc-contracts-'));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe('the registry', () => {
  const registry = ContractRegistry.load(ROOT);
  const c = registry.get('com.thaleon.wm:analyze-portfolio', '1.0.0')!;

  it('loads one folder per contract id and version, with every seed schema', () => {
    expect(registry.list().map((x) => `${x.contract_id}@${x.version}`)).toEqual(['com.thaleon.wm:analyze-portfolio@1.0.0']);
    expect(c.intent).toBe('analyze_portfolio');
    for (const kind of SCHEMA_FILES) {
      expect(c.schemas[kind].$schema).toBe('https://json-schema.org/draft/2020-12/schema');
      expect(String(c.schemas[kind].$id)).toBe(`https://schemas.thaleon.com/contracts/analyze_portfolio/1.0.0/${kind}.schema.json`);
    }
    // The shared error definition is the poll schema's Error, verbatim.
    const { $schema: _s, $id: _i, title: _t, ...error } = c.schemas.error;
    expect(error).toEqual((c.schemas['poll-response'].$defs as Record<string, unknown>).Error);
  });

  it('fills declared defaults into a valid request', () => {
    const body = request({ execution_preferences: null });
    body.context.analysis_scope = {};
    expect(registry.validateRequest(c, body)).toEqual({ ok: true });
    expect(body.context.analysis_scope).toEqual({ include_performance: true, include_risk: true, include_attribution: false, include_recommendations: true });
    expect(body.output_spec.sections).toEqual(['overview', 'holdings', 'risk', 'recommendations', 'disclaimer']);
  });

  it('checks formats (draft 2020-12 with ajv-formats)', () => {
    const v = registry.validateRequest(c, request({ context: { as_of: '2026-02-30' } }));
    expect(v.ok).toBe(false);
    if (!v.ok) expect(v.violations[0]).toMatchObject({ pointer: '/context/as_of', keyword: 'format' });
  });
});

describe('additive evolution', () => {
  const current = ContractRegistry.load(ROOT);

  it('finds no breaking change between consecutive versions of every contract', () => {
    const ids = new Set(current.list().map((c) => c.contract_id));
    for (const id of ids) {
      const versions = current.versionsOf(id);
      for (let i = 1; i < versions.length; i++) expect(breakingChanges(versions[i - 1]!, versions[i]!), `${id} ${versions[i]!.version}`).toEqual([]);
    }
  });

  async function nextVersion(change: (schemas: Record<string, any>) => void) {
    const target = path.join(dir, String(Math.random()).slice(2));
    await cp(path.join(ROOT, 'com.thaleon.wm/analyze-portfolio/1.0.0'), path.join(target, 'com.thaleon.wm/analyze-portfolio/1.1.0'), { recursive: true });
    const folder = path.join(target, 'com.thaleon.wm/analyze-portfolio/1.1.0');
    const schemas: Record<string, any> = {};
    for (const kind of SCHEMA_FILES) schemas[kind] = JSON.parse((await readFile(path.join(folder, `${kind}.schema.json`), 'utf8')).replaceAll('/1.0.0/', '/1.1.0/'));
    for (const kind of ['request', 'submit-response', 'poll-response']) {
      const props = schemas[kind].properties?.contract?.properties ?? schemas[kind].$defs?.SyncResult?.properties?.contract?.properties;
      if (props) props.version.const = '1.1.0';
    }
    change(schemas);
    for (const kind of SCHEMA_FILES) await writeFile(path.join(folder, `${kind}.schema.json`), JSON.stringify(schemas[kind]));
    await writeFile(path.join(folder, 'contract.json'), JSON.stringify({ contract_id: 'com.thaleon.wm:analyze-portfolio', version: '1.1.0', intent: 'analyze_portfolio' }));
    const next = ContractRegistry.load(target).get('com.thaleon.wm:analyze-portfolio', '1.1.0')!;
    return breakingChanges(current.get('com.thaleon.wm:analyze-portfolio', '1.0.0')!, next);
  }

  it('accepts a new optional field and a new enum value', async () => {
    const changes = await nextVersion((s) => {
      s.request.properties.context.properties.tax_residency = { type: 'string' };
      s.request.properties.output_spec.properties.format.enum.push('pdf');
    });
    expect(changes).toEqual([]);
  });

  it('reports removals, new required request fields, narrowed ranges and changed types', async () => {
    const changes = await nextVersion((s) => {
      delete s.result.properties.performance;
      s.request.properties.context.required.push('locale');
      s.request.properties.execution_preferences.properties.poll_long_wait_ms.maximum = 10000;
      s['poll-response'].properties.ttl_seconds.type = 'string';
      s['poll-response'].properties.status.enum = ['QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED'];
    });
    expect(changes).toEqual(
      expect.arrayContaining([
        'result#/properties/performance: removed',
        'request#/properties/context: locale became required',
        'request#/properties/execution_preferences/properties/poll_long_wait_ms: maximum narrowed',
        'poll-response#/properties/ttl_seconds: type changed from "integer" to "string"',
        'poll-response#/properties/status: enum values removed: CANCELED',
      ]),
    );
  });
});
