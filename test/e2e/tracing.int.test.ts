// OpenTelemetry: one IM run, with an LLM call, a tool call held for approval
// and a child agent, reaches a real OTLP/HTTP receiver as one tree in the
// trace the client named; the router and the tool's webhook get its context.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushTraces } from '../../src/runtime/tracing.js';
import { registerAssistant } from '../support/assistant.js';
import { startFakeLlm, type FakeLlm } from '../support/fake-llm.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';
import { importSamplePortfolios, pollUntilDone, request } from '../support/contracts.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp.js';

let s: TestStack;
let llm: FakeLlm;
let otlp: OtlpReceiver;
let dir: string;
const servers: http.Server[] = [];
const webhookTraceparents: string[] = [];

const listen = async (server: http.Server) => {
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  // The standard variables, read when the stack starts its tracing.
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = otlp.url;
  process.env.OTEL_BSP_SCHEDULE_DELAY = '100';
  dir = await mkdtemp(path.join(os.tmpdir(), 'abc-tracing-'));
  const policyFile = path.join(dir, 'policy.json');
  await writeFile(policyFile, JSON.stringify({ version: 1, default: 'allow', rules: [{ id: 'money', tools: ['bank.transfer'], decision: 'require_approval' }] }));
  llm = await startFakeLlm();
  s = await startTestStack({ policyFile, llm: { routerUrl: llm.url }, contracts: { workers: 1 } });
  await importSamplePortfolios(s.orm);
  const bank = http.createServer(async (req, res) => {
    for await (const _ of req);
    webhookTraceparents.push(String(req.headers.traceparent ?? ''));
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"receipt":"r-1"}');
  });
  await s.http('/v1/tools/register', { method: 'POST', json: { name: 'bank.transfer', kind: 'http', endpoint: await listen(bank), side_effect: true } });
  await registerAssistant(s, listen);
});
afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    server.close();
  }
  await s?.close();
  await llm?.close();
  await otlp?.close();
  await rm(dir, { recursive: true, force: true });
  delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  delete process.env.OTEL_BSP_SCHEDULE_DELAY;
});

/** The spans of one trace once `ready` holds for them, flushing the exporter while waiting. */
async function spansOf(traceId: string, ready: (spans: ReceivedSpan[]) => boolean): Promise<ReceivedSpan[]> {
  for (let i = 0; i < 100; i++) {
    await flushTraces();
    const spans = otlp.spans.filter((x) => x.traceId === traceId);
    if (ready(spans)) return spans;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`trace ${traceId} never had the spans asked for: ${otlp.spans.filter((x) => x.traceId === traceId).map((x) => x.name).join(', ')}`);
}

const one = (spans: ReceivedSpan[], name: string) => {
  const found = spans.filter((x) => x.name === name);
  expect(found, name).toHaveLength(1);
  return found[0]!;
};

/** Whether `span` descends from `ancestor` through the spans given. */
function descends(spans: ReceivedSpan[], span: ReceivedSpan, ancestor: ReceivedSpan): boolean {
  const byId = new Map(spans.map((x) => [x.spanId, x]));
  for (let at: ReceivedSpan | undefined = span; at; at = byId.get(at.parentSpanId)) if (at.parentSpanId === ancestor.spanId) return true;
  return false;
}

describe('tracing over OTLP', () => {
  it('sends one IM run, its LLM call, its approved tool call and its child agent as one tree in the client’s trace', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const clientSpan = '00f067aa0ba902b7';
    const ws = await new WsClient(s.url, { traceparent: `00-${traceId}-${clientSpan}-01` }).open();
    ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
    ws.send({ type: 'agent_invoke', session_id: `sess_trace_${Date.now()}`, agent_id: 'assistant', message: { role: 'user', content: 'pay the bill' } });
    const started = await ws.next('run_started');
    expect(started.trace_id).toBe(traceId);
    const asked = await ws.next('approval_required');
    ws.send({ type: 'approval_decision', approval_id: asked.approval_id, decision: 'approve' });
    await ws.next('done');
    ws.close();

    const spans = await spansOf(traceId, (xs) =>
      ['abc.ingress.v1.IngressService/Connect', 'execute_tool bank.transfer', 'chat gpt-4', 'invoke_agent echo', 'approval'].every((n) => xs.some((x) => x.name === n))
      && xs.filter((x) => x.name.startsWith('invoke_agent')).length === 2);

    // One tree: a single span hangs from the client's, and every other span's parent was received.
    const ids = new Set(spans.map((x) => x.spanId));
    const roots = spans.filter((x) => !ids.has(x.parentSpanId));
    expect(roots.map((x) => [x.name, x.parentSpanId])).toEqual([['GET /v1/im', clientSpan]]);
    const upgrade = roots[0]!;
    expect(upgrade.kind).toBe(2);
    expect(upgrade.attributes['http.response.status_code']).toBe(101);

    const connect = one(spans, 'abc.ingress.v1.IngressService/Connect');
    expect(connect.parentSpanId).toBe(upgrade.spanId);
    expect(connect.attributes['rpc.system.name']).toBe('grpc');
    const run = one(spans, 'invoke_agent assistant');
    expect(run.parentSpanId).toBe(connect.spanId);
    expect(run.attributes).toMatchObject({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.id': 'assistant', 'abc.run.id': started.run_id });

    // The agent passed its traceparent on: its LLM call, tool call and child agent are the run's.
    const chat = one(spans, 'chat gpt-4');
    expect(descends(spans, chat, run)).toBe(true);
    expect(chat.kind).toBe(3);
    expect(chat.attributes).toMatchObject({ 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4', 'gen_ai.usage.input_tokens': expect.any(Number), 'gen_ai.usage.output_tokens': expect.any(Number) });
    expect(spans.find((x) => x.name === 'POST /v1/chat/completions' && x.kind === 2)).toBeDefined();

    const tool = one(spans, 'execute_tool bank.transfer');
    expect(descends(spans, tool, run)).toBe(true);
    expect(tool.attributes).toMatchObject({ 'gen_ai.tool.name': 'bank.transfer', 'gen_ai.operation.name': 'execute_tool' });
    const approval = one(spans, 'approval');
    expect(approval.attributes).toMatchObject({ 'abc.approval.id': asked.approval_id, 'abc.approval.outcome': 'APPROVED', 'abc.approval.decided_by': 'user:u1' });

    const child = one(spans, 'invoke_agent echo');
    expect(descends(spans, child, run)).toBe(true);

    // PostgreSQL statements are spans of the calls that made them.
    const queries = spans.filter((x) => x.attributes['db.system.name'] === 'postgresql' || x.attributes['db.system'] === 'postgresql');
    expect(queries.length).toBeGreaterThan(0);
    expect(queries.every((q) => ids.has(q.parentSpanId))).toBe(true);

    // The router and the webhook were called in the trace, under the call's span.
    const routerParent = llm.requests.at(-1)?.headers.traceparent;
    expect(routerParent).toBe(`00-${traceId}-${chat.spanId}-01`);
    expect(webhookTraceparents).toEqual([`00-${traceId}-${tool.spanId}-01`]);
    expect(otlp.contentTypes.every((t) => t === 'application/x-protobuf')).toBe(true);
  });

  it('continues the trace a hello names, for the runs of its connection', async () => {
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const ws = await new WsClient(s.url).open();
    ws.send({ type: 'hello', api_key: s.key, user_id: 'u1', traceparent: `00-${traceId}-b9c7c989f97918e1-01` });
    ws.send({ type: 'agent_invoke', session_id: `sess_hello_${Date.now()}`, agent_id: 'echo', message: { role: 'user', content: 'hi' } });
    expect((await ws.next('run_started')).trace_id).toBe(traceId);
    await ws.next('done');
    ws.close();
    const spans = await spansOf(traceId, (xs) => xs.some((x) => x.name === 'invoke_agent echo'));
    expect(one(spans, 'invoke_agent echo').parentSpanId).toBe('b9c7c989f97918e1');
    // A malformed traceparent is refused at the boundary.
    const bad = await new WsClient(s.url).open();
    bad.send({ type: 'hello', api_key: s.key, user_id: 'u1', traceparent: 'not-a-traceparent' });
    expect(await bad.next('error')).toMatchObject({ code: 'invalid_request', field: 'traceparent' });
    bad.close();
  });

  it('sends a contract’s queued execution, phase by phase, under the submit that started it', async () => {
    const traceId = 'a3ce929d0e0e47364bf92f3577b34da6';
    const res = await s.http('/v1/contracts:submit', { method: 'POST', json: request(), headers: { traceparent: `00-${traceId}-b7ad6b7169203331-01` } });
    expect(res.status).toBe(202);
    const ticket = ((await res.json()) as { task: { ticket: string } }).task.ticket;
    expect((await pollUntilDone((p) => s.http(p), ticket)).status).toBe('SUCCEEDED');

    const spans = await spansOf(traceId, (xs) => xs.some((x) => x.name === 'contract com.thaleon.wm:analyze-portfolio'));
    const submit = one(spans, 'abc.ingress.v1.IngressService/SubmitContract');
    expect(one(spans, 'POST /v1/contracts:submit').parentSpanId).toBe('b7ad6b7169203331');
    const passes = spans.filter((x) => x.name === 'contract com.thaleon.wm:analyze-portfolio');
    expect(passes.length).toBeGreaterThan(0);
    for (const pass of passes) {
      expect(pass.parentSpanId).toBe(submit.spanId);
      expect(pass.attributes['abc.ticket']).toBe(ticket);
    }
    const phases = spans.filter((x) => x.name.startsWith('contract.phase ')).map((x) => x.attributes['abc.contract.phase']);
    for (const phase of ['CONTEXT_BUILD', 'PLAN_GENERATION', 'STEP_EXECUTION', 'GLOBAL_REVIEW']) expect(phases).toContain(phase);
    const ids = new Set(passes.map((x) => x.spanId));
    expect(spans.filter((x) => x.name.startsWith('contract.phase ')).every((x) => ids.has(x.parentSpanId))).toBe(true);
  });
});
