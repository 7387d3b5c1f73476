// Contracts and assemblies belong to a tenant or to the platform. A tenant sees
// the platform's and its own, never another tenant's; its own assembly for an
// intent wins over the platform's; only the default tenant's admin writes the
// platform's catalogue.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeys } from '../../src/access/api-keys.js';
import { startTestStack, type TestStack } from '../support/gateway.js';

let s: TestStack;
let acme: string; // an admin key of tenant acme
let globex: string; // an admin key of tenant globex

beforeAll(async () => {
  s = await startTestStack({ contracts: { workers: 1 } });
  const keys = new ApiKeys(s.orm);
  for (const t of ['acme', 'globex']) await keys.createTenant(t);
  acme = (await keys.create('acme-admin', { tenantId: 'acme' })).key;
  globex = (await keys.create('globex-admin', { tenantId: 'globex' })).key;
});
afterAll(() => s?.close());

type Json = Record<string, any>;

/** A contract with no code: count the words of a text (the text.stats unit). */
const contract = (id: string, intent: string, version = '1.0.0'): Json => ({
  contract_id: id,
  version,
  intent,
  schemas: {
    request: { $id: `urn:${id}:${version}:request`, type: 'object', required: ['contract', 'correlation', 'intent', 'input'], properties: { input: { type: 'object', required: ['text'] } } },
    result: { $id: `urn:${id}:${version}:result`, type: 'object', required: ['words'] },
  },
});
const assembly = (id: string, intent: string, result: Json, version = '1.0.0'): Json => ({
  assembly_id: id,
  version,
  intent,
  expected_latency_ms: 1000,
  capabilities: [{ name: 'text.stats', kind: 'TOOL' }],
  steps: [{ id: 'stats', label: 'Count', tool_name: 'text.stats', input: { text: '$.input.text' }, dependencies: [] }],
  output: { result },
});
const submitBody = (id: string, intent: string, text = 'One two three. Four five.'): Json => {
  const n = randomUUID();
  return {
    contract: { contract_id: id, version: '1.0.0' },
    intent,
    correlation: { request_id: `req-${n}`, idempotency_key: `idem-${n}`, session_id: `sess-${n}`, sent_at: new Date().toISOString() },
    input: { text },
    execution_preferences: { mode: 'sync', max_latency_ms: 20_000 },
  };
};

const post = (path: string, key: string, json: unknown) => s.http(path, { method: 'POST', key, json });
const submit = async (key: string, body: Json) => {
  const res = await post('/v1/contracts:submit', key, body);
  return { status: res.status, body: await res.json() };
};
/** What a list route shows the key: `id@version`, marked when it is the platform's. */
const listed = async (path: string, key: string): Promise<string[]> => {
  const body = (await (await s.http(path, { key })).json()) as Json;
  return (body.contracts ?? body.assemblies).map((x: Json) => `${x.contract_id ?? x.assembly_id}@${x.version}${x.platform ? ' (platform)' : ''}`);
};

describe("a tenant's own contracts and assemblies", () => {
  it('are registered into its tenant, and no other tenant sees or runs them', async () => {
    const registered = await post('/v1/contracts', acme, contract('acme:words', 'count_words'));
    expect(registered.status).toBe(201);
    expect((await registered.json()).contract).toMatchObject({ contract_id: 'acme:words', platform: false, source: 'api' });
    const asm = await post('/v1/assemblies', acme, assembly('acme-words', 'count_words', { '/words': '/stats/words' }));
    expect(asm.status).toBe(201);
    expect((await asm.json()).assembly).toMatchObject({ assembly_id: 'acme-words', platform: false });

    // acme sees the platform's catalogue and its own; globex only the platform's.
    const acmeContracts = await listed('/v1/contracts', acme);
    expect(acmeContracts).toContain('acme:words@1.0.0');
    expect(acmeContracts).toContain('com.abc.examples:summarize-document@1.0.0 (platform)');
    expect(await listed('/v1/contracts', globex)).not.toContain('acme:words@1.0.0');
    expect(await listed('/v1/assemblies', acme)).toContain('acme-words@1.0.0');
    expect(await listed('/v1/assemblies', globex)).not.toContain('acme-words@1.0.0');

    const ran = await submit(acme, submitBody('acme:words', 'count_words'));
    expect(ran.status).toBe(200);
    expect(ran.body.result).toEqual({ words: 5 });
    const refused = await submit(globex, submitBody('acme:words', 'count_words'));
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'UNKNOWN_CONTRACT', details: { pointer: '/contract/contract_id' } });
  });

  it('are named per tenant: another tenant may take the same id and intent', async () => {
    const other = contract('acme:words', 'count_words');
    other.description = 'globex counts differently';
    expect((await post('/v1/contracts', globex, other)).status).toBe(201);
    // acme's own version stands, and acme registering it again is a no-op.
    const again = await post('/v1/contracts', acme, contract('acme:words', 'count_words'));
    expect(again.status).toBe(200);
    expect((await again.json()).created).toBe(false);
    // Without an assembly of its own, globex cannot run it.
    const noAssembly = await submit(globex, submitBody('acme:words', 'count_words'));
    expect(noAssembly.body.error).toMatchObject({ code: 'NO_ASSEMBLY' });
  });

  it("are checked against the platform's: a platform intent cannot be taken", async () => {
    const res = await post('/v1/contracts', acme, contract('acme:summaries', 'summarize_document'));
    expect(res.status).toBe(409);
    expect((await res.json()).error).toMatchObject({ code: 'INTENT_TAKEN' });
  });
});

describe("the platform's catalogue", () => {
  it('is written by an admin of the default tenant and seen by every tenant', async () => {
    const c = await post('/v1/contracts?platform=true', s.key, contract('abc:words', 'word_count'));
    expect(c.status).toBe(201);
    expect((await c.json()).contract).toMatchObject({ platform: true });
    expect((await post('/v1/assemblies?platform=true', s.key, assembly('words', 'word_count', { '/words': '/stats/words' }))).status).toBe(201);
    for (const key of [acme, globex, s.key]) {
      const ran = await submit(key, submitBody('abc:words', 'word_count', 'a b'));
      expect(ran.body.result).toEqual({ words: 2 });
    }
  });

  it("yields, for a tenant, to that tenant's own assembly for the intent", async () => {
    expect((await post('/v1/assemblies', acme, assembly('acme-words-detailed', 'word_count', { '/words': '/stats/words', '/sentences': '/stats/sentences' }))).status).toBe(201);
    expect((await submit(acme, submitBody('abc:words', 'word_count', 'One. Two.'))).body.result).toEqual({ words: 2, sentences: 2 });
    expect((await submit(globex, submitBody('abc:words', 'word_count', 'One. Two.'))).body.result).toEqual({ words: 2 });
  });

  it("refuses other tenants' writes, and a tenant reusing a platform version's id and version with other content", async () => {
    for (const path of ['/v1/contracts?platform=true', '/v1/assemblies?platform=true']) {
      const res = await post(path, acme, path.includes('contracts') ? contract('acme:x', 'x_thing') : assembly('x', 'x_thing', { '/words': '/stats/words' }));
      expect(res.status).toBe(403);
      expect((await res.json()).error).toMatchObject({ code: 'forbidden', details: { scope: 'admin', tenant: 'default' } });
    }
    const clash = await post('/v1/assemblies', acme, assembly('words', 'word_count', { '/count': '/stats/words' }));
    expect(clash.status).toBe(409);
    expect((await clash.json()).error).toMatchObject({ code: 'ASSEMBLY_VERSION_EXISTS' });
    const versionClash = contract('abc:words', 'word_count');
    versionClash.description = 'not the platform one';
    expect((await post('/v1/contracts', acme, versionClash)).status).toBe(409);
  });
});
