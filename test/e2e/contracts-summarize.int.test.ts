// The second contract, com.abc.examples:summarize-document, has no code of its
// own: schemas, an assembly with a declarative output, a registered HTTP tool,
// ABC's llm.complete and text.stats units. Submit, poll, cancel, idempotency
// and self-healing work for it as for analyze_portfolio, over HTTP and gRPC.
// Runtime registration adds versions that every core can use at once.
import { SubmitContractRequest } from '../../gen/abc/ingress/v1/ingress.js';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeCore, connectCore } from '../../gateway/core-client.js';
import { ContractRegistry } from '../../src/contracts/registry.js';
import { startCore } from '../../src/main/core.js';
import { completion, startFakeLlm, type FakeLlm } from '../support/fake-llm.js';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { coreOptions } from '../support/core.js';
import { failure, unary, withKey } from '../support/grpc.js';

type Json = Record<string, any>;

const CONTRACT = { contract_id: 'com.abc.examples:summarize-document', version: '1.0.0' };
const registry = ContractRegistry.load('contracts');
const contract = registry.get(CONTRACT.contract_id, CONTRACT.version)!;

const DOCS: Record<string, { title: string; text: string; source: string }> = {
  'doc-1': {
    title: 'Tides',
    text: 'The tide rises twice a day. The moon pulls the sea.\n\nSailors read tide tables before they leave the harbour.',
    source: 'library://tides',
  },
};

/** A real document service: POST with the webhook body, answers the document; `slow` waits, `flaky` fails once. */
async function startDocumentService() {
  let flaky = 0;
  const waiting: (() => void)[] = [];
  const calls: Json[] = [];
  const server = http.createServer(async (req, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const body = JSON.parse(raw) as { args: { document_id: string } };
    calls.push(body);
    const id = body.args.document_id;
    const send = (status: number, doc: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(doc));
    if (id === 'slow') await new Promise<void>((r) => waiting.push(r));
    if (id === 'flaky' && flaky++ === 0) return send(503, { error: { code: 'DOCUMENTS_BUSY', message: 'try again', retryable: true, suggested_action: 'RETRY' } });
    const doc = DOCS[id] ?? (id === 'slow' || id === 'flaky' ? DOCS['doc-1'] : undefined);
    if (!doc) return send(404, { error: { code: 'DOCUMENT_NOT_FOUND', category: 'DATA_SOURCE', message: `no document ${id}`, retryable: false, suggested_action: 'HALT' } });
    send(200, doc);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/documents`,
    calls,
    release: () => waiting.splice(0).forEach((r) => r()),
    close: () => (waiting.splice(0).forEach((r) => r()), server.closeAllConnections(), new Promise((r) => server.close(r))),
  };
}

let s: TestStack;
let llm: FakeLlm;
let docs: Awaited<ReturnType<typeof startDocumentService>>;

beforeAll(async () => {
  llm = await startFakeLlm();
  llm.behave((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion(req.json.model, 'Tides rise twice daily, pulled by the moon; sailors plan by them.')));
  });
  docs = await startDocumentService();
  s = await startTestStack({ llm: { routerUrl: llm.url, model: 'summary-model' }, contracts: { workers: 1 } });
  const tool = await s.http('/v1/tools/register', {
    method: 'POST',
    json: { name: 'documents.fetch', kind: 'http', endpoint: docs.url, timeout_ms: 30_000, input_schema: { type: 'object', required: ['document_id'], properties: { document_id: { type: 'string' } } } },
  });
  expect(tool.status).toBe(200);
});
afterAll(async () => {
  await s?.close();
  await llm?.close();
  await docs?.close();
});

function request(documentId = 'doc-1', overrides: Json = {}): Json {
  const id = randomUUID();
  return {
    contract: CONTRACT,
    intent: 'summarize_document',
    correlation: { request_id: `req-${id}`, idempotency_key: `idem-${id}`, session_id: 'session-summaries', sent_at: new Date().toISOString() },
    input: { document_id: documentId },
    output_spec: { format: 'json' },
    execution_preferences: { mode: 'sync', max_latency_ms: 20_000 },
    ...overrides,
  };
}

const submit = async (body: Json) => {
  const res = await s.http('/v1/contracts:submit', { method: 'POST', json: body });
  return { status: res.status, body: await res.json(), ticket: res.headers.get('x-abc-ticket')! };
};

async function pollDone(ticket: string): Promise<Json> {
  for (let i = 0; i < 60; i++) {
    const doc = await (await s.http(`/v1/tickets/${ticket}?wait_ms=2000`)).json();
    if (['SUCCEEDED', 'FAILED', 'CANCELED'].includes(doc.status)) return doc;
  }
  throw new Error(`ticket ${ticket} did not finish`);
}

describe('summarize-document over HTTP', () => {
  it('answers sync with a schema-valid result built by the declarative output', async () => {
    const { status, body } = await submit(request());
    expect(status, JSON.stringify(body)).toBe(200);
    expect(registry.validateResponse(contract, 'submit-response', body)).toEqual({ ok: true });
    expect(body.result).toEqual({
      document_id: 'doc-1',
      title: 'Tides',
      summary: 'Tides rise twice daily, pulled by the moon; sailors plan by them.',
      model: 'summary-model',
      stats: { characters: DOCS['doc-1']!.text.length, words: 20, sentences: 3, paragraphs: 2, reading_minutes: 1 },
      source: 'library://tides',
    });
    // The LLM step went through the proxy with the document and the assembly's token cap.
    const call = llm.requests.at(-1)!;
    expect(call.json.messages.at(-1).content).toBe(DOCS['doc-1']!.text);
    expect(call.json.max_tokens).toBe(300);
    // The tool received the bound input.
    expect(docs.calls.at(-1)!.args).toEqual({ document_id: 'doc-1' });
  });

  it('renders the markdown artifact from the assembly template', async () => {
    const { body, ticket } = await submit(request('doc-1', { output_spec: { format: 'markdown' } }));
    expect(body.kind).toBe('result');
    const artifact = await s.http(`/v1/tickets/${ticket}/artifact`);
    expect(artifact.headers.get('content-type')).toContain('text/markdown');
    expect(await artifact.text()).toBe('# Tides\n\nTides rise twice daily, pulled by the moon; sailors plan by them.\n\n*20 words, about 1 min to read · source: library://tides*\n');
  });

  it('is idempotent: the same key answers the same ticket, a different request under it conflicts', async () => {
    // The document service holds `slow` until released, so the replay meets a running ticket.
    const first = request('slow', { execution_preferences: { mode: 'async' } });
    const again = () => submit({ ...first, correlation: { ...first.correlation, request_id: `req-${randomUUID()}` } });
    const a = await submit(first);
    const b = await again();
    expect([a.status, b.status]).toEqual([202, 202]);
    expect(b.body.task.ticket).toBe(a.body.task.ticket);
    const c = await submit({ ...first, input: { document_id: 'other' } });
    expect(c.status).toBe(409);
    expect(c.body.error.code).toBe('idempotency_conflict');
    await expect.poll(() => docs.calls.filter((call) => call.args.document_id === 'slow').length, { timeout: 10_000 }).toBe(1);
    docs.release();
    expect((await pollDone(a.body.task.ticket)).status).toBe('SUCCEEDED');
    // A replay of the finished ticket answers its outcome, whatever the mode.
    const d = await again();
    expect(d.status).toBe(200);
    expect(d.ticket).toBe(a.body.task.ticket);
    expect(d.body.result.title).toBe('Tides');
  });

  it('cancels a running ticket', async () => {
    const slow = () => docs.calls.filter((c) => c.args.document_id === 'slow').length;
    const before = slow();
    const { status, body } = await submit(request('slow', { execution_preferences: { mode: 'async' } }));
    expect(status).toBe(202);
    const ticket = body.task.ticket;
    await expect.poll(slow, { timeout: 10_000 }).toBe(before + 1);
    const cancel = await s.http(`/v1/tickets/${ticket}:cancel`, { method: 'POST', json: { reason: 'not needed' } });
    expect(cancel.status).toBe(200);
    docs.release();
    const done = await pollDone(ticket);
    expect(done.status).toBe('CANCELED');
    expect(registry.validateResponse(contract, 'poll-response', done)).toEqual({ ok: true });
  });

  it('heals itself: a retryable tool failure is retried, and the ticket succeeds', async () => {
    const { status, body, ticket } = await submit(request('flaky'));
    expect(status, JSON.stringify(body)).toBe(200);
    expect(body.result.title).toBe('Tides');
    const events = await s.orm.em.fork().execute<{ type: string; payload: Json }[]>('SELECT type, payload FROM ticket_events WHERE ticket = ? ORDER BY seq', [ticket]);
    const actions = events.filter((e) => e.type === 'POLICY_EVALUATION').map((e) => e.payload.action).filter((a) => a && a !== 'CONTINUE');
    expect(actions).toContain('RETRY');
  });

  it('fails a missing document with the tool’s own error and category, not retried', async () => {
    const before = docs.calls.length;
    const { status, body } = await submit(request('missing'));
    expect(status).toBe(404);
    expect(body.error).toMatchObject({ code: 'DOCUMENT_NOT_FOUND', category: 'DATA_SOURCE', retryable: false });
    expect(docs.calls.length - before).toBe(1);
  });
});

describe('summarize-document over gRPC', () => {
  it('submits async, polls to SUCCEEDED, and reads the artifact', async () => {
    const meta = withKey(s.key);
    const body = request('doc-1', { execution_preferences: { mode: 'async' } });
    const res = await unary(s.clients.ingress.submitContract.bind(s.clients.ingress), SubmitContractRequest.fromPartial({ body }), meta);
    expect(res.outcome?.$case).toBe('task');
    let poll: Json = {};
    for (let i = 0; i < 30 && poll.status !== 'TICKET_STATUS_SUCCEEDED'; i++) poll = await unary(s.clients.ingress.pollTicket.bind(s.clients.ingress), { ticket: res.ticket, waitMs: 2000, noWait: false }, meta);
    expect(poll.status).toBe('TICKET_STATUS_SUCCEEDED');
    expect(poll.result).toMatchObject({ document_id: 'doc-1', title: 'Tides', stats: { words: 20 } });
    const artifact = await unary(s.clients.ingress.getArtifact.bind(s.clients.ingress), { ticket: res.ticket }, meta);
    expect(JSON.parse(artifact.content).summary).toContain('Tides rise');
  });
});

describe('runtime registration', () => {
  const files = (kind: string) => JSON.parse(readFileSync(`contracts/com.abc.examples/summarize-document/1.0.0/${kind}.schema.json`, 'utf8'));
  /** Version `v` of the contract: its schemas with new $ids and version consts, changed by `edit`. */
  function version(v: string, edit: (schemas: Json) => void = () => {}): Json {
    const schemas = { request: files('request'), result: files('result') };
    const text = JSON.stringify(schemas).replaceAll('/1.0.0/', `/${v}/`).replace('"version":{"const":"1.0.0"}', `"version":{"const":"${v}"}`);
    const out = JSON.parse(text);
    edit(out);
    return { contract_id: CONTRACT.contract_id, version: v, intent: 'summarize_document', schemas: out };
  }
  const register = async (def: Json) => {
    const res = await s.http('/v1/contracts', { method: 'POST', json: def });
    return { status: res.status, body: await res.json() };
  };

  it('registers an additive version, usable at once on another core, and the same again is a no-op', async () => {
    const def = version('1.1.0', (x) => (x.request.properties.context.properties.audience = { type: 'string' }));
    const first = await register(def);
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    expect(first.body).toMatchObject({ created: true, contract: { contract_id: CONTRACT.contract_id, version: '1.1.0', source: 'api' } });
    // The envelopes were derived from the result schema.
    expect(Object.keys(first.body.contract.schemas).sort()).toEqual(['error', 'poll-response', 'request', 'result', 'submit-response']);
    expect((await register(def)).status).toBe(200);

    // A second core on the same database, which never saw the registration.
    const other = await startCore(coreOptions(s.orm, { publicBaseUrl: s.url, llm: { routerUrl: llm.url, model: 'summary-model' }, contracts: { workers: 1 } }));
    const clients = connectCore(other.address);
    try {
      const body = request('doc-1', { contract: { ...CONTRACT, version: '1.1.0' }, context: { audience: 'sailors' } });
      const res = await unary(clients.ingress.submitContract.bind(clients.ingress), SubmitContractRequest.fromPartial({ body }), withKey(s.key));
      expect(res.outcome?.$case).toBe('result');
      const listed = await unary(clients.ingress.listContracts.bind(clients.ingress), { contractId: CONTRACT.contract_id }, withKey(s.key));
      expect(listed.contracts.map((c) => `${c.version}:${c.source}`)).toEqual(['1.0.0:file', '1.1.0:api']);
    } finally {
      closeCore(clients);
      await other.close();
    }
  });

  it('refuses a version that is not additive, a changed version, a stolen intent and a broken definition', async () => {
    const audience = (x: Json) => (x.request.properties.context.properties.audience = { type: 'string' });
    const breaking = await register(version('1.2.0', (x) => (audience(x), delete x.result.properties.source)));
    expect(breaking.status).toBe(412);
    expect(breaking.body.error).toMatchObject({ code: 'CONTRACT_NOT_ADDITIVE' });
    expect(breaking.body.error.details.changes).toEqual(['result#/properties/source: removed']);
    // A new major version may break.
    expect((await register(version('2.0.0', (x) => delete x.result.properties.source))).status).toBe(201);

    const changed = await register(version('1.1.0', (x) => (x.request.properties.context.properties.audience = { type: 'integer' })));
    expect(changed.status).toBe(409);
    expect(changed.body.error.code).toBe('CONTRACT_VERSION_EXISTS');

    const stolen = await register({ ...version('1.0.0'), contract_id: 'com.other:thief' });
    expect(stolen.status).toBe(409);
    expect(stolen.body.error.code).toBe('INTENT_TAKEN');

    const broken = await register(version('1.3.0', (x) => (x.result.type = 'no-such-type')));
    expect(broken.status).toBe(400);
    expect(broken.body.error).toMatchObject({ code: 'INVALID_CONTRACT', details: { pointer: '/definition/schemas/result' } });

    const shape = await register({ contract_id: CONTRACT.contract_id, version: '1.4', intent: 'summarize_document', schemas: {} });
    expect(shape.status).toBe(400);
    expect(shape.body.error.code).toBe('invalid_request');
  });

  it('refuses registration without a key', async () => {
    expect((await s.http('/v1/contracts', { method: 'POST', json: version('1.5.0'), key: null })).status).toBe(401);
    const e = await failure(unary(s.clients.ingress.registerContract.bind(s.clients.ingress), { definition: version('1.5.0'), platform: false }));
    expect(e.code).toBe(16);
  });
});

describe('registration over gRPC refuses malformed definitions with INVALID_ARGUMENT', () => {
  it.each([
    ['a description that is not a string', { description: 7 }],
    ['a schema kind ABC does not know', { schemas: { request: { $id: 'urn:a' }, result: { $id: 'urn:b' }, extra: {} } }],
    ['a schema that is not an object', { schemas: { request: 'x', result: { $id: 'urn:b' } } }],
    ['no schemas at all', { schemas: null }],
  ])('%s', async (_, change) => {
    const definition = { contract_id: 'com.bad:one', version: '1.0.0', intent: 'bad_one', schemas: { request: { $id: 'urn:bad:req' }, result: { $id: 'urn:bad:res' } }, ...change };
    const e = await failure(unary(s.clients.ingress.registerContract.bind(s.clients.ingress), { definition, platform: false }, withKey(s.key)));
    expect(e.code).toBe(3);
  });
});
