// Generated bad input across every surface: HTTP routes, IM frames and gRPC
// methods. No answer may be a 5xx or INTERNAL; every error has ABC's shape;
// afterwards the same process still serves a normal run. The seed is fixed, so
// a failure reproduces: FUZZ_SEED=n picks another.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { Client, Metadata, status as GrpcStatus, type ServiceDefinition, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Error as ErrorMessage } from '../../gen/abc/common/v1/error.js';
import { DecisionServiceService } from '../../gen/abc/decision/v1/decision.js';
import { IngressServiceService } from '../../gen/abc/ingress/v1/ingress.js';
import { ObserverServiceService } from '../../gen/abc/observer/v1/observer.js';
import { AgentServiceService } from '../../gen/abc/orchestrator/v1/agent.js';
import { ApprovalServiceService } from '../../gen/abc/orchestrator/v1/approval.js';
import { ContextStoreServiceService } from '../../gen/abc/orchestrator/v1/context.js';
import { LlmProxyServiceService } from '../../gen/abc/orchestrator/v1/llm.js';
import { RunServiceService } from '../../gen/abc/orchestrator/v1/run.js';
import { SessionServiceService } from '../../gen/abc/orchestrator/v1/session.js';
import { ToolServiceService } from '../../gen/abc/orchestrator/v1/tool.js';
import { importSamplePortfolios } from '../support/contracts.js';
import { startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { completion, startFakeLlm, type FakeLlm } from '../support/fake-llm.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';

const SEED = Number(process.env.FUZZ_SEED ?? 0xabc);
const CATEGORIES = ['VALIDATION', 'AUTH', 'DATA_SOURCE', 'EXECUTION', 'TIMEOUT', 'COMPLIANCE', 'INTERNAL'];

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, pick: <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!, int: (n: number) => Math.floor(next() * n) };
}

const deep = (n: number): unknown => (n === 0 ? 'bottom' : { d: deep(n - 1) });
const deepArray = (n: number): unknown => (n === 0 ? [] : [deepArray(n - 1)]);

/** Values that have broken a surface before, and their neighbours. */
const NASTY: unknown[] = [
  '\u0000', 'a\u0000b', '\ud800', 'x\udfff', '', ' ', 'x'.repeat(5000), 'x'.repeat(70_000), '../../etc/passwd', '%00', '\u202e', '😀', '9'.repeat(40),
  1e20, -1, 0, 2 ** 31, 2 ** 53, 2 ** 63, -(2 ** 63), 1.5, 1e308, -1e308, true, false, null, [], {}, [null], { a: '\u0000' }, { '\u0000': 1 },
  deep(45), deep(33), deepArray(60), '1e20', 'NaN', '-1', '2026-13-45', 'not-a-date',
];
/** Raw (already encoded) path segments and query values. */
const RAW = ['%00', 'a%00b', '%ED%A0%80', '%zz', '%', 'x'.repeat(3000), '..%2F..', '%F0%9F%98%80', '9'.repeat(40), '-1', '1e20', '99999999999999999999', '%C0%80', 'a%20b', ''];

interface Route {
  method: 'GET' | 'POST' | 'PUT';
  path: string;
  query?: Record<string, string>;
  body?: Record<string, unknown>;
}

let s: TestStack;
let agent: FakeAgent;
let llm: FakeLlm;
let ids: { run: string; session: string; ticket: string; toolCall: string; context: string };
const failures: string[] = [];
let cases = 0;

beforeAll(async () => {
  llm = await startFakeLlm((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion(String(req.json?.model ?? 'm'))));
  });
  s = await startTestStack({ llm: { routerUrl: llm.url }, contracts: { workers: 1 } });
  await importSamplePortfolios(s.orm);
  agent = await startFakeAgent();
  expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'fuzz', name: 'Fuzz', endpoint: agent.url } })).status).toBe(200);
  const ws = await new WsClient(s.url).open();
  ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
  ws.send({ type: 'agent_invoke', session_id: 'sess_fuzz', agent_id: 'fuzz', message: { role: 'user', content: 'hi' } });
  const run = (await ws.next('done')).run_id as string;
  ws.close();
  const tool = await (await s.http('/v1/tools/echo:invoke', { method: 'POST', json: { run_id: run, args: { a: 1 } } })).json();
  const blob = await (await s.http('/v1/context', { method: 'POST', json: { owner_type: 'session', owner_id: 'sess_fuzz', data: { a: 1 } } })).json();
  const submitted = await s.http('/v1/contracts:submit', { method: 'POST', json: { ...contractRequest(), execution_preferences: { mode: 'async' } } });
  ids = { run, session: 'sess_fuzz', ticket: submitted.headers.get('x-abc-ticket')!, toolCall: tool.tool_call_id, context: blob.blob.context_key };
});
afterAll(async () => {
  await agent?.close();
  await s?.close();
  await llm?.close();
  keepAlive.destroy();
});

const contractRequest = () => JSON.parse(readFileSync('examples/contracts/analyze-portfolio.json', 'utf8')) as Record<string, unknown>;

function routes(): Route[] {
  const assembly = JSON.parse(readFileSync('packs/analyze-portfolio/assemblies/analyze_portfolio/1.0.0.json', 'utf8')) as Record<string, unknown>;
  return [
    { method: 'POST', path: '/v1/agents/register', body: { agent_id: 'fz', name: 'Fz', endpoint: agent.url, capabilities: ['x'], metadata: { a: 1 } } },
    { method: 'GET', path: '/v1/agents' },
    { method: 'POST', path: '/v1/agents/fuzz/heartbeat', body: {} },
    { method: 'GET', path: `/v1/runs/${ids.run}` },
    { method: 'POST', path: `/v1/runs/${ids.run}:cancel`, body: { reason: 'r' } },
    { method: 'GET', path: `/v1/runs/${ids.run}/events`, query: { after_ts: '0', types: 'run_done', limit: '10', cursor: '0' } },
    { method: 'GET', path: `/v1/runs/${ids.run}/events/stream`, query: { types: 'run_done', cursor: '0' } },
    { method: 'GET', path: `/v1/runs/${ids.run}/consequences` },
    { method: 'GET', path: `/v1/sessions/${ids.session}/messages`, query: { limit: '5' } },
    { method: 'POST', path: `/v1/sessions/${ids.session}/messages`, body: { role: 'user', content: 'c', metadata: { a: 1 } } },
    { method: 'POST', path: '/v1/context', body: { owner_type: 'session', owner_id: ids.session, data: { a: 1 }, expected_version: 1 } },
    { method: 'GET', path: `/v1/context/${ids.context}`, query: { version: '1' } },
    { method: 'POST', path: '/v1/tools/register', body: { name: 'fz.tool', kind: 'http', endpoint: 'http://127.0.0.1:9/x', timeout_ms: 1000, input_schema: { type: 'object' } } },
    { method: 'GET', path: '/v1/tools' },
    { method: 'POST', path: '/v1/tools/echo:invoke', body: { run_id: ids.run, args: { a: 1 }, idempotency_key: 'k', timeout_ms: 1000 } },
    { method: 'GET', path: `/v1/tool_calls/${ids.toolCall}` },
    { method: 'POST', path: `/v1/tool_calls/${ids.toolCall}:wait`, query: { timeout_ms: '10' } },
    { method: 'GET', path: '/v1/approvals', query: { session_id: ids.session, status: 'pending' } },
    { method: 'POST', path: '/v1/approvals/apr_x:decide', body: { decision: 'approve', reason: 'r' } },
    { method: 'GET', path: '/api/execution/topology', query: { machine: 'run' } },
    { method: 'GET', path: '/v1/metrics/runs', query: { since_ts: '0', agent_id: 'fuzz' } },
    { method: 'GET', path: '/v1/metrics/tools', query: { since_ts: '0' } },
    { method: 'GET', path: `/api/execution/${ids.session}/timeline` },
    { method: 'GET', path: `/api/execution/${ids.session}/snapshot` },
    { method: 'GET', path: `/api/execution/${ids.session}/consequences` },
    { method: 'POST', path: '/v1/contracts:submit', body: { ...contractRequest(), execution_preferences: { mode: 'async' } } },
    { method: 'GET', path: `/v1/tickets/${ids.ticket}`, query: { wait_ms: '0' } },
    { method: 'POST', path: `/v1/tickets/${ids.ticket}:cancel`, body: { reason: 'r' } },
    { method: 'POST', path: `/v1/tickets/${ids.ticket}:feedback`, body: { action: 'continue', feedback: 'f', data: {} } },
    { method: 'GET', path: `/v1/tickets/${ids.ticket}/artifact` },
    { method: 'GET', path: `/v1/tickets/${ids.ticket}/trace`, query: { types: 'x' } },
    { method: 'GET', path: `/v1/tickets/${ids.ticket}/context` },
    { method: 'GET', path: '/v1/memory/search', query: { scope: 'SESSION', q: 'x', scope_id: ids.session, limit: '5' } },
    { method: 'GET', path: '/v1/assemblies', query: { intent: 'analyze_portfolio' } },
    { method: 'GET', path: '/v1/contracts', query: { contract_id: 'com.abc.examples:summarize-document' } },
    {
      method: 'POST',
      path: '/v1/contracts',
      body: {
        contract_id: 'com.fuzz:thing',
        version: '1.0.0',
        intent: 'fuzz_thing',
        schemas: { request: { $id: 'urn:fuzz:req', type: 'object', properties: { n: { type: 'integer', minimum: 1 } } }, result: { $id: 'urn:fuzz:res', type: 'object' } },
      },
    },
    { method: 'POST', path: '/v1/assemblies', body: { ...assembly, version: '9.9.9', expected_latency_ms: 1000 } },
    { method: 'POST', path: '/v1/assemblies', body: { ...assembly, assembly_id: 'fz', version: '1.0.0', output: { result: { '/a': '/load_portfolio/source' }, markdown: '{{#each /a}}{{.}}{{/each}}' } } },
    { method: 'POST', path: '/v1/plans', body: { intent: 'analyze_portfolio', context: { as_of: '2026-11-20', currency: 'USD' }, input: { positions: [] } } },
    { method: 'POST', path: '/v1/chat/completions', body: { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 } },
    { method: 'GET', path: '/v1/models' },
    { method: 'POST', path: '/v1/stream_tokens', body: { run_id: ids.run, ttl_seconds: 60 } },
    { method: 'PUT', path: '/v1/secrets/fz.secret', body: { value: 'v' } },
    { method: 'GET', path: '/v1/secrets' },
    { method: 'GET', path: '/v1/policy' },
    { method: 'PUT', path: '/v1/policy', body: { version: 1000, default: 'allow', rules: [{ id: 'fz', tools: ['fz.*'], decision: 'require_approval' }] } },
    { method: 'GET', path: '/v1/nope' },
  ];
}

/** Replaces one randomly chosen leaf (or key) of `body` with a nasty value, or adds an unknown key. */
function mutate(r: ReturnType<typeof prng>, body: unknown): unknown {
  const copy = structuredClone(body) as Record<string, unknown>;
  const paths: (string | number)[][] = [];
  const walk = (v: unknown, p: (string | number)[]) => {
    if (p.length) paths.push(p);
    if (v && typeof v === 'object' && p.length < 6) for (const [k, inner] of Object.entries(v)) walk(inner, [...p, Array.isArray(v) ? Number(k) : k]);
  };
  walk(copy, []);
  const value = r.pick(NASTY);
  if (!paths.length || r.next() < 0.1) return { ...copy, [r.pick(['\u0000', 'extra', 'a'.repeat(300)])]: value };
  const path = r.pick(paths);
  let target = copy as Record<string | number, unknown>;
  for (const k of path.slice(0, -1)) target = target[k] as Record<string | number, unknown>;
  if (r.next() < 0.1) delete target[path.at(-1)!];
  else target[path.at(-1)!] = value;
  return copy;
}

function checkHttp(label: string, status: number, text: string, contentType: string | null): void {
  cases++;
  if (status >= 500) return void failures.push(`${label} -> ${status} ${text.slice(0, 200)}`);
  if (status < 400 || !contentType?.includes('json')) return;
  try {
    const body = JSON.parse(text) as { error?: Record<string, unknown> };
    const e = body.error;
    // The OpenAI-compatible routes answer in OpenAI's shape (what fails before routing, in ABC's).
    if ((label.includes('/v1/chat/completions') || label.includes('/v1/models')) && !e?.category) {
      if (!e || typeof e.message !== 'string' || typeof e.type !== 'string') failures.push(`${label} -> ${status} not the OpenAI error shape: ${text.slice(0, 200)}`);
      return;
    }
    if (!e || typeof e.code !== 'string' || typeof e.message !== 'string' || typeof e.retryable !== 'boolean' || !CATEGORIES.includes(String(e.category))) {
      failures.push(`${label} -> ${status} not ABC's error shape: ${text.slice(0, 200)}`);
    }
  } catch {
    failures.push(`${label} -> ${status} not JSON: ${text.slice(0, 200)}`);
  }
}

/** One connection reused from case to case, so each case also proves the last one left it usable. */
const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });

/** One raw HTTP request (fetch refuses some of these URLs and headers). */
function rawHttp(method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; text: string; contentType: string | null }> {
  const url = new URL(s.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method, path, headers: { authorization: `Bearer ${s.key}`, ...headers }, agent: keepAlive }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
        // SSE streams of live runs do not end: their headers are all we judge.
        if (res.headers['content-type']?.includes('event-stream')) res.destroy();
      });
      res.on('close', () => resolve({ status: res.statusCode ?? 0, text, contentType: res.headers['content-type'] ?? null }));
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.end(body);
  });
}

async function httpCase(r: ReturnType<typeof prng>, route: Route): Promise<void> {
  const kind = r.int(10);
  let path = route.path;
  let query = new URLSearchParams(route.query).toString();
  let body: string | undefined = route.body ? JSON.stringify(route.body) : undefined;
  const headers: Record<string, string> = route.body ? { 'content-type': 'application/json' } : {};
  if (kind <= 3 && route.body) body = JSON.stringify(mutate(r, route.body));
  else if (kind === 4 && route.query) {
    const key = r.pick(Object.keys(route.query));
    query = query.replace(new RegExp(`${key}=[^&]*`), `${key}=${r.pick(RAW)}`);
  } else if (kind === 5) {
    const segments = path.split('/');
    const i = 1 + r.int(segments.length - 1);
    segments[i] = segments[i]!.replace(/^[^:]*/, r.pick(RAW));
    path = segments.join('/');
  } else if (kind === 6) {
    body = r.pick(['{', '[]', '"x"', '{"a":', 'null', '', '\u0000', '{"a":"\\u0000"}', '{"a":"\\ud800"}', JSON.stringify(deep(60))]);
    headers['content-type'] = r.pick(['application/json', 'text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1']);
  } else if (kind === 7) {
    headers[r.pick(['x-request-id', 'traceparent', 'last-event-id', 'x-user-id', 'x-run-id'])] = r.pick(['x'.repeat(9000), '\t', '00-zz', '999999999999999999999', '%00']);
  } else if (kind === 8) {
    query = `${query}&${r.pick(['unknown=1', 'limit=1e20', 'limit=-5', 'after_ts=1e20', 'since_ts=99999999999999999999', 'version=2147483648', 'timeout_ms=1e20', 'wait_ms=99999999999', 'cursor=99999999999999999999'])}`;
  } else if (kind === 9 && route.body) {
    body = JSON.stringify(mutate(r, mutate(r, route.body)));
  }
  const target = `${path}${query ? `?${query}` : ''}`;
  const res = await rawHttp(route.method, target, headers, body).catch((error: Error) => ({ status: 0, text: error.message, contentType: null }));
  if (res.status === 0) {
    cases++;
    failures.push(`${route.method} ${target.slice(0, 120)} -> connection failed: ${res.text}`);
    return;
  }
  checkHttp(`${route.method} ${target.slice(0, 120)} ${body?.slice(0, 120) ?? ''}`, res.status, res.text, res.contentType);
}

describe('the fuzz corpus', () => {
  it('never answers 5xx or INTERNAL on any surface, and ABC still serves a run afterwards', async () => {
    const r = prng(SEED);
    const table = routes();

    // HTTP: every route, mutated many ways.
    for (let i = 0; i < 1200; i++) await httpCase(r, table[i % table.length]!);
    // An oversized header block and a bad URL answer in ABC's shape too.
    for (const [path, headers] of [['/v1/agents', { 'x-big': 'x'.repeat(20_000) }], ['/v1/%zz', {}], [`/v1/runs/${'r'.repeat(5000)}`, {}]] as const) {
      const res = await rawHttp('GET', path, headers);
      checkHttp(`GET ${path.slice(0, 40)} (headers ${Object.keys(headers).join(',')})`, res.status, res.text, res.contentType);
    }

    // IM frames over one WebSocket (a new one whenever the server closes it).
    let ws = await helloSocket();
    const frames = [
      { type: 'agent_invoke', session_id: 'sess_fz_im', agent_id: 'fuzz', message: { role: 'user', content: 'x' } },
      { type: 'cancel_run', run_id: ids.run },
      { type: 'resume', session_id: ids.session, cursor: '0' },
      { type: 'approval_decision', approval_id: 'apr_x', decision: 'approve' },
      { type: 'tool_result', tool_call_id: ids.toolCall, ok: true, result: { a: 1 } },
      { type: 'hello', api_key: s.key, user_id: 'u1' },
    ];
    for (let i = 0; i < 250; i++) {
      if (ws.closed) {
        if (ws.closeCode === 1011) failures.push(`IM socket closed with 1011 after frame ${i}`);
        ws = await helloSocket();
      }
      const frame = i % 7 === 6 ? r.pick(['{', '[]', 'null', '\u0000', JSON.stringify(deep(50)), '{"type":"\\ud800"}']) : JSON.stringify(mutate(r, { ts: Date.now(), request_id: `r${i}`, ...r.pick(frames) }));
      const before = ws.frames.length;
      ws.ws.send(frame);
      cases++;
      await ws.until((f) => f.length > before, 300).catch(() => {});
      for (const f of ws.frames.slice(before)) {
        if (f.type === 'error' && (f.code === 'internal_error' || typeof f.message !== 'string' || typeof f.code !== 'string')) failures.push(`IM ${frame.slice(0, 160)} -> ${JSON.stringify(f).slice(0, 200)}`);
      }
    }
    if (ws.closeCode === 1011) failures.push('IM socket closed with 1011');
    ws.close();

    // gRPC: every unary and server-streaming method, with junk bytes and with nasty field values.
    const services: ServiceDefinition[] = [
      IngressServiceService, RunServiceService, AgentServiceService, ToolServiceService, ApprovalServiceService,
      LlmProxyServiceService, SessionServiceService, ContextStoreServiceService, DecisionServiceService, ObserverServiceService,
    ] as unknown as ServiceDefinition[];
    const client = new Client(s.core.address, (await import('@grpc/grpc-js')).credentials.createInsecure());
    const metadata = new Metadata();
    metadata.set('authorization', `Bearer ${s.key}`);
    for (let round = 0; round < 6; round++) {
      for (const service of services) {
        for (const method of Object.values(service)) {
          if (method.requestStream) continue;
          const bytes = round % 2 === 0 ? junkBytes(r) : fieldBytes(r, method);
          if (!bytes) continue;
          const outcome = await grpcCall(client, method.path, bytes, method.responseStream, metadata);
          cases++;
          if (outcome) failures.push(`gRPC ${method.path} -> ${outcome}`);
        }
      }
    }
    // The IM stream over gRPC (Connect): junk bytes and nasty frames get error frames, never INTERNAL, and the stream lives on.
    const connect = client.makeBidiStreamRequest('/abc.ingress.v1.IngressService/Connect', (b: Buffer) => b, (b: Buffer) => b, new Metadata());
    const replies: Buffer[] = [];
    let status: ServiceError | undefined;
    connect.on('data', (b: Buffer) => replies.push(b));
    connect.on('error', (e: ServiceError) => (status = e));
    const frameMethod = IngressServiceService.connect;
    connect.write(frameMethod.requestSerialize({ ts: 1, requestId: 'h', sessionId: '', runId: '', frame: { $case: 'hello', value: { apiKey: s.key, userId: 'u1', clientMeta: undefined, excludeEvents: [], traceparent: '', batchFrames: false } } }));
    for (let i = 0; i < 60; i++) {
      connect.write(i % 2 === 0 ? junkBytes(r) : fieldBytes(r, frameMethod as unknown as ServiceDefinition[string]) ?? junkBytes(r));
      cases++;
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
    const answers = replies.map((b) => frameMethod.responseDeserialize(b));
    if (status) failures.push(`gRPC Connect ended: ${GrpcStatus[status.code]} ${status.details}`);
    for (const a of answers) {
      if (a.frame?.$case === 'error' && (a.frame.value.code === 'internal_error' || !a.frame.value.message)) failures.push(`gRPC Connect frame: ${JSON.stringify(a.frame.value).slice(0, 200)}`);
    }
    expect(answers[0]?.frame?.$case).toBe('helloAck');
    expect(answers.filter((a) => a.frame?.$case === 'error').length).toBeGreaterThan(0);
    connect.end();
    client.close();

    // The same process still serves a normal run.
    const ok = await new WsClient(s.url).open();
    ok.send({ type: 'hello', api_key: s.key, user_id: 'u2' });
    ok.send({ type: 'agent_invoke', session_id: 'sess_after_fuzz', agent_id: 'fuzz', message: { role: 'user', content: 'still here' } });
    expect((await ok.next('done')).type).toBe('done');
    ok.close();

    expect(cases).toBeGreaterThanOrEqual(1000);
    console.info(`fuzz: ${cases} cases, seed ${SEED}`);
    expect(failures, `${failures.length} of ${cases} cases failed (seed ${SEED})`).toEqual([]);
  }, 120_000);
});

async function helloSocket(): Promise<WsClient & { closeCode?: number }> {
  const ws = (await new WsClient(s.url).open()) as WsClient & { closeCode?: number };
  ws.ws.on('close', (code) => (ws.closeCode = code));
  ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
  await ws.next('hello_ack');
  return ws;
}

function junkBytes(r: ReturnType<typeof prng>): Buffer {
  const n = r.pick([1, 2, 5, 17, 64, 300]);
  return Buffer.from(Array.from({ length: n }, () => r.int(256)));
}

/** A request whose string fields hold nasty strings and whose numbers are extreme, encoded by the method's own serializer. */
function fieldBytes(r: ReturnType<typeof prng>, method: ServiceDefinition[string]): Buffer | undefined {
  const base = method.requestDeserialize(Buffer.alloc(0)) as Record<string, unknown>;
  const strings = ['\u0000', 'a\u0000b', 'x'.repeat(300_000), 'run_x', '\ud800', '9'.repeat(40), ''];
  const numbers = [2 ** 53 - 1, -1, 2 ** 31, 1e15, 0];
  const message: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(base)) {
    if (typeof value === 'string') message[key] = r.pick(strings);
    else if (typeof value === 'number' && !/status|kind|scope|level|decision|action|verdict|role|phase/i.test(key)) message[key] = r.pick(numbers);
    else if (Array.isArray(value)) message[key] = [r.pick(strings)];
  }
  try {
    return method.requestSerialize(message) as Buffer;
  } catch {
    return undefined;
  }
}

/** Undefined when the outcome is acceptable, else what was wrong. */
function grpcCall(client: Client, path: string, bytes: Buffer, stream: boolean, metadata: Metadata): Promise<string | undefined> {
  const identity = (b: Buffer) => b;
  const judge = (error: ServiceError | null): string | undefined => {
    if (!error || error.code === GrpcStatus.OK || error.code === GrpcStatus.CANCELLED || error.code === GrpcStatus.DEADLINE_EXCEEDED) return undefined;
    if (error.code === GrpcStatus.INTERNAL || error.code === GrpcStatus.UNKNOWN) return `${GrpcStatus[error.code]}: ${error.details.slice(0, 200)}`;
    const raw = error.metadata?.get('abc-error-bin')[0];
    if (!Buffer.isBuffer(raw)) return `${GrpcStatus[error.code]} without abc-error-bin: ${error.details.slice(0, 120)}`;
    if (raw.length > 16_384) return `an error trailer of ${raw.length} bytes`;
    const e = ErrorMessage.decode(raw);
    return e.code && e.message ? undefined : `a malformed error payload: ${JSON.stringify(e).slice(0, 200)}`;
  };
  return new Promise((resolve) => {
    const deadline = Date.now() + 2000;
    if (!stream) {
      client.makeUnaryRequest(path, identity, identity, bytes, metadata, { deadline }, (error) => resolve(judge(error)));
      return;
    }
    const call = client.makeServerStreamRequest(path, identity, identity, bytes, metadata, { deadline });
    call.on('data', () => {});
    call.on('error', (error: ServiceError) => resolve(judge(error)));
    call.on('end', () => resolve(undefined));
  });
}
