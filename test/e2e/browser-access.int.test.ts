// What a browser may do: CORS for allowed origins only, the IM WebSocket for
// allowed origins only, and a run's events over a stock EventSource with a
// short-lived stream token in the query (EventSource sends no headers).
import { EventSource } from 'eventsource';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { liveRun } from '../support/live-run.js';

const APP = 'https://app.example';
let s: TestStack;
let agent: FakeAgent;

beforeAll(async () => {
  s = await startTestStack({ agentIdleTimeoutMs: 30_000 }, { corsOrigins: [APP] });
  agent = await startFakeAgent();
  expect((await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'web', name: 'web', endpoint: agent.url } })).status).toBe(200);
});
afterAll(async () => {
  await agent?.close();
  await s?.close();
});

const preflight = (origin: string) =>
  fetch(`${s.url}/v1/runs/run_x`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' } });

describe('CORS', () => {
  it('answers a preflight for an allowed origin, with credentials', async () => {
    const res = await preflight(APP);
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe(APP);
    expect(res.headers.get('access-control-allow-credentials')).toBe('true');
    expect(res.headers.get('access-control-allow-headers')).toContain('authorization');
  });

  it('grants nothing to any other origin', async () => {
    const res = await preflight('https://evil.example');
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    const get = await s.http('/v1/agents', { headers: { origin: 'https://evil.example' } });
    expect(get.headers.get('access-control-allow-origin')).toBeNull();
    expect((await s.http('/v1/agents', { headers: { origin: APP } })).headers.get('access-control-allow-origin')).toBe(APP);
  });
});

describe('the IM WebSocket', () => {
  const open = (origin?: string) =>
    new Promise<{ ok: true; ws: WebSocket } | { ok: false; status: number }>((resolve) => {
      const ws = new WebSocket(`${s.url.replace(/^http/, 'ws')}/v1/im`, origin ? { origin } : {});
      ws.once('open', () => resolve({ ok: true, ws }));
      ws.once('unexpected-response', (_req, res) => resolve({ ok: false, status: res.statusCode ?? 0 }));
    });

  it('refuses a page of an origin not on the list', async () => {
    expect(await open('https://evil.example')).toEqual({ ok: false, status: 403 });
  });

  it('accepts an allowed origin, and clients that send none', async () => {
    for (const origin of [APP, undefined]) {
      const opened = await open(origin);
      expect(opened.ok).toBe(true);
      if (opened.ok) opened.ws.close();
    }
  });
});

describe('stream tokens', () => {
  const mint = async (json: unknown, key?: string) => s.http('/v1/stream_tokens', { method: 'POST', json, key });

  it("let a stock EventSource follow a run's events, and nothing else", async () => {
    const run = await liveRun(s, agent, { agentId: 'web' });
    const res = await mint({ run_id: run.runId, ttl_seconds: 60 });
    expect(res.status).toBe(200);
    const { token, expires_at, stream_url } = await res.json();
    expect(expires_at).toBeGreaterThan(Date.now());
    expect(token).toMatch(/^abcst_/);

    const source = new EventSource(`${s.url}${stream_url}`);
    const seen: string[] = [];
    const delta = new Promise<Record<string, unknown>>((resolve, reject) => {
      source.addEventListener('agent_stream_delta', (e) => resolve(JSON.parse(e.data)));
      source.onerror = () => reject(new Error('the stream failed'));
    });
    source.addEventListener('run_started', () => seen.push('run_started'));
    expect(await delta).toMatchObject({ run_id: run.runId, payload: { text: 'working' } });
    source.close();
    expect(seen).toContain('run_started');

    // Read-only and for this run only.
    const other = await liveRun(s, agent, { agentId: 'web' });
    expect((await fetch(`${s.url}/v1/runs/${other.runId}/events/stream?access_token=${token}`)).status).toBe(404);
    expect((await s.http(`/v1/runs/${run.runId}`, { key: token })).status).toBe(403);
    expect((await s.http(`/v1/runs/${run.runId}:cancel`, { method: 'POST', json: {}, key: token })).status).toBe(403);
    // A query token is taken on SSE routes only.
    expect((await fetch(`${s.url}/v1/runs/${run.runId}?access_token=${token}`)).status).toBe(401);
    // A forged or altered token is no token.
    const forged = `${token.slice(0, -4)}AAAA`;
    expect((await fetch(`${s.url}/v1/runs/${run.runId}/events/stream?access_token=${forged}`)).status).toBe(401);
    for (const r of [run, other]) {
      r.release();
      r.ws.close();
    }
  });

  it('are minted only for what the key may read', async () => {
    const res = await mint({ run_id: 'run_nobody' });
    expect(res.status).toBe(404);
    const both = await mint({ run_id: 'a', session_id: 'b' });
    expect(both.status).toBe(400);
    expect((await mint({ run_id: 'a', ttl_seconds: 7200 })).status).toBe(400);
  });
});
