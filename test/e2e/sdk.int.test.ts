// An agent written with the example SDK: LLM through the proxy, a tool held for
// approval (invoke, then wait), and a call to another agent, all through ABC.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readEvents } from '../../src/store/event-log.js';
import { registerAssistant } from '../support/assistant.js';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';

let s: TestStack;
let llm: FakeLlm;
let dir: string;
let bank: http.Server;
let transfers = 0;
const servers: http.Server[] = [];

const listen = async (server: http.Server) => {
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'abc-sdk-'));
  const policyFile = path.join(dir, 'policy.json');
  await writeFile(policyFile, JSON.stringify({ version: 1, default: 'allow', rules: [{ id: 'money', tools: ['bank.transfer'], decision: 'require_approval' }] }));
  llm = await startFakeLlm();
  s = await startTestStack({ policyFile, llm: { routerUrl: llm.url } });
  bank = http.createServer(async (req, res) => {
    for await (const _ of req);
    transfers++;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"receipt":"r-1"}');
  });
  const bankUrl = await listen(bank);
  await s.http('/v1/tools/register', { method: 'POST', json: { name: 'bank.transfer', kind: 'http', endpoint: bankUrl, side_effect: true } });

  await registerAssistant(s, listen);
});
afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    server.close();
  }
  await s.close();
  await llm.close();
  await rm(dir, { recursive: true, force: true });
});

describe('an agent built with the SDK', () => {
  it('uses the LLM, waits through an approval for a tool, and calls another agent', async () => {
    const ws = await new WsClient(s.url).open();
    ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
    ws.send({ type: 'agent_invoke', session_id: `sess_sdk_${Date.now()}`, agent_id: 'assistant', message: { role: 'user', content: 'pay the bill' } });
    const asked = await ws.next('approval_required');
    expect(asked.tool_name).toBe('bank.transfer');
    expect(transfers).toBe(0);
    ws.send({ type: 'approval_decision', approval_id: asked.approval_id, decision: 'approve' });
    const done = await ws.next('done');
    expect(done.final_message).toBe('Hello world / {"receipt":"r-1"} / You said: confirm');
    expect(transfers).toBe(1);
    const types = (await readEvents(s.orm.em.fork(), { runId: done.run_id }, '0', 200)).map((e) => e.type);
    for (const t of ['llm_call_done', 'approval_created', 'approval_decision', 'tool_result', 'agent_called_child', 'run_done']) expect(types).toContain(t);
    ws.close();
  });
});
