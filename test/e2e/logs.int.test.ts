// Log hygiene of a running `abc serve`: every line is one JSON object without
// duplicate keys; clients that leave mid-stream (SSE, WebSocket, the LLM
// proxy) are info-level events without stacks; an agent going down is logged
// once, not on every health check; lines of a request name its trace.
import type { ChildProcess } from 'node:child_process';
import type { ServerResponse } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';
import { afterAll, describe, expect, it } from 'vitest';
import { startFakeAgent, sse, type FakeAgent } from '../support/fake-agent.js';
import { chunk, startFakeLlm, type FakeLlm } from '../support/fake-llm.js';
import { exited, run, waitForLog } from '../support/process.js';

const dirs: string[] = [];
let agent: FakeAgent | undefined;
let llm: FakeLlm | undefined;
let serve: ChildProcess | undefined;
afterAll(async () => {
  // A failed test leaves no abc serve behind.
  if (serve && serve.exitCode === null && serve.signalCode === null) {
    serve.kill('SIGKILL');
    await exited(serve);
  }
  await agent?.close();
  await llm?.close();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

/** Streams a piece every 50 ms for two seconds, or until the caller leaves; then the last. */
async function trickle(res: ServerResponse, closed: Promise<void>, line: (i: number) => string, last: string): Promise<void> {
  let gone = false;
  void closed.then(() => (gone = true));
  for (let i = 0; i < 40 && !gone; i++) {
    res.write(line(i));
    await new Promise((r) => setTimeout(r, 50));
  }
  res.end(last);
}

/** The keys of a JSON object's top level, in order, duplicates kept. */
function topLevelKeys(json: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (c === '"') {
      let j = i + 1;
      while (json[j] !== '"') j += json[j] === '\\' ? 2 : 1;
      if (depth === 1 && /^\s*:/.test(json.slice(j + 1, j + 3))) keys.push(JSON.parse(json.slice(i, j + 1)) as string);
      i = j;
    } else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
  }
  return keys;
}

describe('the logs of abc serve', () => {
  it('are one JSON object a line, with no duplicate keys; disconnects are info without stacks; a dead agent is logged once', async () => {
    agent = await startFakeAgent((inv, res) => {
      sse(res, 'state', { state: 'thinking' });
      return trickle(res, inv.closed, (i) => `event: delta\ndata: ${JSON.stringify({ text: `w${i} ` })}\n\n`, `event: done\ndata: ${JSON.stringify({ usage: {} })}\n\n`);
    });
    llm = await startFakeLlm();
    llm.behave((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      return trickle(res, req.closed, (i) => `data: ${JSON.stringify(chunk('gpt-4', { content: `t${i}` }))}\n\n`, 'data: [DONE]\n\n');
    });
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'abc-logs-'));
    dirs.push(dataDir);
    const child = (serve = run(['serve'], {
      ABC_DATA_DIR: dataDir, ABC_HTTP_ADDR: '127.0.0.1:0', ABC_GRPC_ADDR: '127.0.0.1:0', LOG_LEVEL: 'info',
      LLM_ROUTER_URL: llm.url, AGENT_HEARTBEAT_INTERVAL_MS: '100', AGENT_UNHEALTHY_AFTER_MS: '200',
    }));
    let stdout = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    const http = (await waitForLog(child, 'ABC is ready')).http as string;
    const key = readFileSync(path.join(dataDir, 'dev-api-key'), 'utf8').trim();
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const post = (p: string, body: unknown, init: RequestInit = {}) => fetch(`${http}${p}`, { method: 'POST', headers: auth, body: JSON.stringify(body), ...init });
    expect((await post('/v1/agents/register', { agent_id: 'slow', name: 'slow', endpoint: agent.url })).status).toBe(200);

    // A WebSocket client and an SSE client of a live run leave mid-run.
    const ws = new WebSocket(`${http.replace(/^http/, 'ws')}/v1/im`);
    await new Promise((resolve) => ws.once('open', resolve));
    const frames: Record<string, string>[] = [];
    const next = (type: string) => new Promise<Record<string, string>>((resolve) => {
      const look = () => frames.find((f) => f.type === type);
      const found = look();
      if (found) return resolve(found);
      ws.on('message', () => look() && resolve(look()!));
    });
    ws.on('message', (data) => frames.push(JSON.parse(data.toString())));
    ws.send(JSON.stringify({ type: 'hello', api_key: key, user_id: 'u1' }));
    ws.send(JSON.stringify({ type: 'agent_invoke', session_id: `sess_logs_${Date.now()}`, agent_id: 'slow', message: { role: 'user', content: 'talk' } }));
    const runId = (await next('run_started')).run_id;
    await next('delta');
    const aborted = new AbortController();
    const events = await fetch(`${http}/v1/runs/${runId}/events/stream`, { headers: auth, signal: aborted.signal });
    expect(events.status).toBe(200);
    await events.body!.getReader().read();
    aborted.abort();
    ws.terminate();

    // A streaming LLM call whose client leaves after the first chunk.
    const llmAborted = new AbortController();
    const streamed = await post('/v1/chat/completions', { model: 'gpt-4', stream: true, messages: [{ role: 'user', content: 'hi' }] }, { signal: llmAborted.signal });
    expect(streamed.status).toBe(200);
    await streamed.body!.getReader().read();
    llmAborted.abort();

    // An agent that is down: many checks, one line.
    expect((await post('/v1/agents/register', { agent_id: 'gone', name: 'gone', endpoint: 'http://127.0.0.1:9' })).status).toBe(200);
    await waitForLog(child, 'agent unhealthy');
    await new Promise((r) => setTimeout(r, 1500));

    child.kill('SIGTERM');
    expect(await exited(child)).toBe(0);
    const lines = stdout.split('\n').filter((line) => line.startsWith('{'));
    const records = lines.map((line) => {
      const keys = topLevelKeys(line);
      expect(new Set(keys).size, line).toBe(keys.length);
      return JSON.parse(line) as Record<string, unknown>;
    });
    const loud = records.filter((r) => Number(r.level) >= 40);
    expect(loud.map((r) => [r.msg, r.agentId ?? r.agent_id]), JSON.stringify(loud)).toEqual([['agent unhealthy', 'gone']]);
    expect(records.filter((r) => JSON.stringify(r).includes('Premature close') || (JSON.stringify(r).includes('"stack"') && Number(r.level) < 50))).toEqual([]);
    // Each client that left is one info line: the SSE stream, the LLM stream, the WebSocket.
    const left = records.filter((r) => r.aborted === true || r.msg === 'im connection closed');
    expect(left.map((r) => [r.level, r.msg, String(r.url).split('?')[0]]).sort(), JSON.stringify(left)).toEqual([
      [30, 'im connection closed', '/v1/im'],
      [30, 'request', '/v1/chat/completions'],
      [30, 'request', `/v1/runs/${runId}/events/stream`],
    ]);
    // The gateway's request lines, and the core's lines for a call, name the call's trace.
    const requestLines = records.filter((r) => r.msg === 'request' || r.rpc);
    expect(requestLines.length).toBeGreaterThan(0);
    for (const r of requestLines) expect(r.trace_id, JSON.stringify(r)).toMatch(/^[\da-f]{32}$/);
  }, 120_000);
});
