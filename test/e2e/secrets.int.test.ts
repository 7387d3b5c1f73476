// Connector secrets: a webhook tool names a secret and ABC sends its current
// value; a rotation is used at once and the old version is refused after its
// grace; a value appears in no table but its own, no log line and no response.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeys } from '../../src/access/api-keys.js';
import { startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { liveRun, type LiveRun } from '../support/live-run.js';

const V1 = 'sk-live-7f3a9c0e1d2b4a5f-one';
const V2 = 'sk-live-8e2b1d4c6a9f3e7b-two';
let s: TestStack;
let agent: FakeAgent;
let webhook: http.Server;
let hookUrl: string;
const seen: string[] = [];
const logLines: string[] = [];
const responses: string[] = [];

beforeAll(async () => {
  webhook = http.createServer((req, res) => {
    seen.push(String(req.headers.authorization ?? req.headers['x-api-key'] ?? ''));
    req.resume();
    // A careless webhook that echoes the credential it was sent.
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, echo: req.headers.authorization ?? req.headers['x-api-key'] }));
  });
  await new Promise<void>((r) => webhook.listen(0, '127.0.0.1', r));
  hookUrl = `http://127.0.0.1:${(webhook.address() as AddressInfo).port}/hook`;
  const capture = new Writable({ write: (chunk, _enc, done) => (logLines.push(String(chunk)), done()) });
  s = await startTestStack({ log: pino({ level: 'debug' }, capture), secretGraceMs: 400, agentIdleTimeoutMs: 30_000 });
  agent = await startFakeAgent();
  expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'crm-agent', name: 'crm', endpoint: agent.url } })).status).toBe(200);
  for (const [name, auth] of [
    ['crm.lookup', { type: 'bearer', secret: 'crm' }],
    ['crm.pinned', { type: 'header', header: 'x-api-key', secret: 'crm@1' }],
  ] as const) {
    const res = await s.http('/v1/tools/register', { method: 'POST', json: { name, kind: 'http', endpoint: hookUrl, metadata: { auth } } });
    expect(res.status).toBe(200);
  }
});
afterAll(async () => {
  await agent?.close();
  await s?.close();
  webhook?.close();
});

const call = async (path: string, init: RequestInit & { json?: unknown; key?: string } = {}) => {
  const res = await s.http(path, init);
  const text = await res.text();
  responses.push(text);
  return { status: res.status, body: text ? JSON.parse(text) : null };
};
const invoke = (run: LiveRun, tool: string, q = 'acme') => call(`/v1/tools/${tool}:invoke`, { method: 'POST', key: run.token, json: { run_id: run.runId, args: { q } } });

describe('connector secrets', () => {
  it('are write-only: a version comes back, never the value', async () => {
    const put = await call('/v1/secrets/crm', { method: 'PUT', json: { value: V1 } });
    expect(put.status).toBe(200);
    expect(put.body.secret).toEqual({ name: 'crm', version: 1, created_at: expect.any(Number), retires_at: null });
    expect((await call('/v1/secrets')).body.secrets).toEqual([expect.objectContaining({ name: 'crm', version: 1 })]);
    expect((await call('/v1/secrets/bad name', { method: 'PUT', json: { value: 'x' } })).status).toBe(400);
  });

  it("are sent to the webhook that names them, and scrubbed from what it answers", async () => {
    const run = await liveRun(s, agent, { agentId: 'crm-agent' });
    const res = await invoke(run, 'crm.lookup');
    expect(res.body).toMatchObject({ status: 'succeeded', result: { ok: true, echo: 'Bearer [secret]' } });
    expect(seen.at(-1)).toBe(`Bearer ${V1}`);
    run.release();
    run.ws.close();
  });

  it('rotate: the new version is used at once, the old one is refused after its grace', async () => {
    expect((await call('/v1/secrets/crm', { method: 'PUT', json: { value: V2 } })).body.secret.version).toBe(2);
    const run = await liveRun(s, agent, { agentId: 'crm-agent' });
    expect((await invoke(run, 'crm.lookup')).body.status).toBe('succeeded');
    expect(seen.at(-1)).toBe(`Bearer ${V2}`);
    // Within the grace the pinned old version still works...
    expect((await invoke(run, 'crm.pinned')).body.status).toBe('succeeded');
    expect(seen.at(-1)).toBe(V1);
    // ...and after it, it is refused.
    await new Promise((r) => setTimeout(r, 500));
    const refused = await invoke(run, 'crm.pinned', 'after the grace'); // new args: a new call, not the first one's answer
    expect(refused.body).toMatchObject({ status: 'failed', error: { code: 'tool_failed' } });
    expect(refused.body.error.message).toContain('secret crm@1 does not exist or has been retired');
    run.release();
    run.ws.close();
  });

  it("of one tenant are not another's", async () => {
    const keys = new ApiKeys(s.orm);
    await keys.createTenant('other');
    const { key } = await keys.create('other', { tenantId: 'other' });
    expect((await call('/v1/secrets', { key })).body.secrets).toEqual([]);
  });

  it('appear in no table but their own (sealed), no log line and no response', async () => {
    const em = s.orm.em.fork();
    const tables = await em.execute<{ table_name: string }[]>("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'");
    expect(tables.length).toBeGreaterThan(20);
    for (const { table_name } of tables) {
      const [row] = await em.execute<{ n: number }[]>(`SELECT count(*)::int AS n FROM "${table_name}" x WHERE x::text LIKE ? OR x::text LIKE ?`, [`%${V1}%`, `%${V2}%`]);
      expect(row!.n, table_name).toBe(0);
    }
    expect(logLines.length).toBeGreaterThan(0);
    for (const text of [...logLines, ...responses]) {
      expect(text).not.toContain(V1);
      expect(text).not.toContain(V2);
    }
  });
});
