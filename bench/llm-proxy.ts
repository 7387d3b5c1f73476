// bench/llm-proxy: a client calling a fake OpenAI upstream (in its own process)
// directly vs through ABC (gateway -> gRPC -> core -> upstream) vs through the
// Portkey gateway (a Node gateway of the same kind, from bench/peers), in
// interleaved rounds of one run. A bare chain of ABC's hops (bench/floor.ts)
// shows what any proxy on this path costs.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { benchDatabase, fmt, loadCalls, median, percentile, record, startAbc, startChild, type AbcProcess } from './lib.js';
import { peerPath } from './peers.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const PER_ROUND = Number(process.env.BENCH_REQUESTS ?? 1000);
const CHUNKS = 20;
const STREAM_ROUNDS = Number(process.env.BENCH_STREAM_ROUNDS ?? 5);
const STREAM_CALLS = Number(process.env.BENCH_STREAM_CALLS ?? 400);

const COMPLETION = JSON.stringify({
  id: 'chatcmpl-bench', object: 'chat.completion', created: 0, model: 'gpt-4',
  choices: [{ index: 0, message: { role: 'assistant', content: 'A short answer of ordinary length.' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 20, completion_tokens: 8, total_tokens: 28 },
});

/** The upstream: JSON answers, or 20 chunks each stamped with its send time. */
export function startUpstream(): Promise<http.Server> {
  const server = http.createServer(async (req, res) => {
    let raw = '';
    for await (const c of req) raw += c;
    const body = JSON.parse(raw) as { stream?: boolean; stream_options?: { include_usage?: boolean } };
    if (!body.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(COMPLETION);
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (let i = 0; i < CHUNKS; i++) {
      res.write(`data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"gpt-4","choices":[{"index":0,"delta":{"content":"${now()}"},"finish_reason":null}]}\n\n`);
      await new Promise((r) => setImmediate(r));
    }
    if (body.stream_options?.include_usage) res.write('data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"gpt-4","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":20,"total_tokens":40}}\n\n');
    res.end('data: [DONE]\n\n');
  });
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** Milliseconds since the epoch, to the microsecond: comparable across processes. */
const now = () => performance.timeOrigin + performance.now();

type Target = { url: string; headers: Record<string, string> };

const BODY = JSON.stringify({ model: 'gpt-4', messages: [{ role: 'user', content: 'Say something short.' }] });
const STREAM_BODY = JSON.stringify({ model: 'gpt-4', stream: true, messages: [{ role: 'user', content: 'Say something short.' }] });

async function jsonCall(t: Target): Promise<number> {
  const start = performance.now();
  const res = await fetch(`${t.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...t.headers }, body: BODY });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
  return performance.now() - start;
}

/** Per-chunk delivery latencies of one streamed call. */
async function streamCall(t: Target): Promise<number[]> {
  const res = await fetch(`${t.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...t.headers }, body: STREAM_BODY });
  const latencies: number[] = [];
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const part of res.body as unknown as AsyncIterable<Uint8Array>) {
    const at = now();
    buffer += decoder.decode(part, { stream: true });
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const match = /"content":"([\d.]+)"/.exec(event);
      if (match) latencies.push(at - Number(match[1]));
    }
  }
  return latencies;
}

/** What one streamed call through `t` gives: its chunks, or how it failed. */
async function streamOutcome(t: Target): Promise<string> {
  try {
    const res = await fetch(`${t.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...t.headers }, body: STREAM_BODY });
    const text = await res.text();
    const chunks = text.split('\n\n').filter((e) => e.includes('chat.completion.chunk')).length;
    return chunks === CHUNKS ? `HTTP ${res.status}, all ${CHUNKS} chunks` : `HTTP ${res.status}, ${chunks} of ${CHUNKS} chunks; it answered: ${text.slice(0, 200).replace(/\s+/g, ' ')}`;
  } catch (error) {
    return `failed: ${(error as Error).message}`;
  }
}

/** `n` JSON calls to `t`, `concurrency` at a time. */
const load = (t: Target, n: number, concurrency: number) => loadCalls(n, concurrency, () => jsonCall(t));

/** bench/floor.ts as a child process, like ABC. */
const startFloor = (upstreamUrl: string) => startChild(['--import', 'tsx', 'bench/floor.ts', upstreamUrl], (line) => line || undefined);

/** The Portkey gateway (bench/peers), headless, on a free port. */
async function startPortkey(): Promise<{ url: string; stop(): void }> {
  const port = await new Promise<number>((resolve) => {
    const probe = http.createServer().listen(0, '127.0.0.1', () => {
      const p = (probe.address() as AddressInfo).port;
      probe.close(() => resolve(p));
    });
  });
  const server = await peerPath('@portkey-ai/gateway', 'build/start-server.js');
  const child = await startChild([server, `--port=${port}`, '--headless'], (line) => (/listening|running|ready|http:\/\//i.test(line) ? `http://127.0.0.1:${port}/v1` : undefined), 'ignore');
  // It prints before it accepts: wait until it answers.
  for (let i = 0; i < 100; i++) {
    if (await fetch(`http://127.0.0.1:${port}/`).then(() => true, () => false)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return child;
}

/** A live run and its token, to measure run-linked (recorded) calls. */
export async function runToken(abc: AbcProcess): Promise<{ runId: string; token: string; close(): void }> {
  let resolveHeaders!: (h: http.IncomingHttpHeaders) => void;
  const headers = new Promise<http.IncomingHttpHeaders>((r) => (resolveHeaders = r));
  const agent = http.createServer((req, res) => {
    if (req.url === '/health') return res.end('{}');
    resolveHeaders(req.headers);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('event: delta\ndata: {"text":"working"}\n\n');
    // An SSE comment now and then: a bench longer than ABC's agent idle timeout keeps its run.
    const keep = setInterval(() => res.write(': working\n\n'), 10_000);
    res.once('close', () => clearInterval(keep));
  });
  await new Promise<void>((r) => agent.listen(0, '127.0.0.1', r));
  await fetch(`${abc.http}/v1/agents/register`, {
    method: 'POST',
    headers: { authorization: `Bearer ${abc.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ agent_id: 'holder', name: 'Holder', endpoint: `http://127.0.0.1:${(agent.address() as AddressInfo).port}` }),
  });
  const ws = new WebSocket(`${abc.http.replace('http', 'ws')}/v1/im`);
  await new Promise((r) => ws.once('open', r));
  ws.send(JSON.stringify({ type: 'hello', api_key: abc.key, user_id: 'bench' }));
  ws.send(JSON.stringify({ type: 'agent_invoke', session_id: `sess_llm_bench_${Date.now()}`, agent_id: 'holder', message: { role: 'user', content: 'hold' } }));
  const h = await headers;
  return { runId: String(h['x-run-id']), token: String(h['x-abc-run-token']), close: () => (ws.close(), agent.closeAllConnections(), agent.close()) };
}

export async function llmProxy(): Promise<void> {
  const upstream = await startChild(['--import', 'tsx', 'bench/upstream-main.ts'], (line) => (line.startsWith('http') ? line : undefined));
  const upstreamUrl = upstream.url;
  const db = await benchDatabase('abc_bench_llm');
  const abc = await startAbc(db.url, { LLM_ROUTER_URL: upstreamUrl });
  const run = await runToken(abc);
  const floorServer = await startFloor(upstreamUrl);
  const portkeyServer = await startPortkey();
  try {
    const direct: Target = { url: upstreamUrl, headers: {} };
    const viaAbc: Target = { url: `${abc.http}/v1`, headers: { authorization: `Bearer ${abc.key}` } };
    const recorded: Target = { url: `${abc.http}/v1`, headers: { authorization: `Bearer ${run.token}`, 'x-run-id': run.runId } };
    const floor: Target = { url: `${floorServer.url}/v1`, headers: {} };
    const portkey: Target = { url: portkeyServer.url, headers: { 'x-portkey-provider': 'openai', 'x-portkey-custom-host': upstreamUrl, authorization: 'Bearer unused' } };
    await load(direct, 50, 4);
    await load(floor, 200, 4);
    await load(viaAbc, 200, 4); // warm-up
    await load(recorded, 50, 4);
    await load(portkey, 200, 4);
    const portkeyStream = await streamOutcome(portkey);

    const results: Record<string, { latencies: number[]; rps: number[] }> = {};
    const add = (key: string, r: { latencies: number[]; rps: number }) => {
      results[key] ??= { latencies: [], rps: [] };
      results[key].latencies.push(...r.latencies);
      results[key].rps.push(r.rps);
    };
    const chunks: Record<string, number[]> = { direct: [], floor: [], abc: [] };
    for (let round = 0; round < ROUNDS; round++) {
      // Interleave, and alternate who goes first, so drift hits both sides alike.
      const order: [string, Target][] = [['direct', direct], ['floor', floor], ['recorded', recorded], ['abc', viaAbc], ['portkey', portkey]];
      if (round % 2) order.reverse();
      for (const [name, target] of order) {
        add(`${name}/1`, await load(target, PER_ROUND / 2, 1));
        add(`${name}/16`, await load(target, PER_ROUND, 16));
        if (name in chunks) for (let i = 0; i < 10; i++) chunks[name]!.push(...(await streamCall(target)));
      }
    }
    const stat = (key: string) => {
      const sorted = [...results[key]!.latencies].sort((a, b) => a - b);
      return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), rps: median(results[key]!.rps) };
    };
    console.log(`\n## llm-proxy: JSON chat completions (${ROUNDS} interleaved rounds)`);
    console.log('| case | direct p50 / p99 ms | ABC p50 / p99 ms | p50 ratio | p99 ratio | direct req/s | ABC req/s | ABC / direct req/s |');
    console.log('|---|---|---|---|---|---|---|---|');
    for (const c of ['1', '16']) {
      const d = stat(`direct/${c}`);
      const a = stat(`abc/${c}`);
      console.log(`| concurrency ${c} | ${fmt(d.p50)} / ${fmt(d.p99)} | ${fmt(a.p50)} / ${fmt(a.p99)} | ${fmt(a.p50 / d.p50, 1)}x | ${fmt(a.p99 / d.p99, 1)}x | ${fmt(d.rps, 0)} | ${fmt(a.rps, 0)} | ${fmt((100 * a.rps) / d.rps, 0)}% |`);
    }
    console.log('\n## llm-proxy: JSON chat completions against the Portkey gateway, same rounds, same upstream');
    console.log('| case | Portkey p50 / p99 ms | ABC p50 / p99 ms | ABC p50 / Portkey p50 | Portkey req/s | ABC req/s | ABC / Portkey req/s |');
    console.log('|---|---|---|---|---|---|---|');
    for (const c of ['1', '16']) {
      const p = stat(`portkey/${c}`);
      const a = stat(`abc/${c}`);
      console.log(`| concurrency ${c} | ${fmt(p.p50)} / ${fmt(p.p99)} | ${fmt(a.p50)} / ${fmt(a.p99)} | ${fmt(a.p50 / p.p50)}x | ${fmt(p.rps, 0)} | ${fmt(a.rps, 0)} | ${fmt(a.rps / p.rps)}x |`);
      record({ bench: 'llm-proxy', name: `JSON c=${c} p50 vs Portkey`, value: a.p50, unit: 'ms', ratio: a.p50 / p.p50, against: 'Portkey gateway p50', goal: c === '1' ? '<= 0.5x' : undefined });
      record({ bench: 'llm-proxy', name: `JSON c=${c} req/s vs Portkey`, value: a.rps, unit: 'req/s', ratio: a.rps / p.rps, against: 'Portkey gateway req/s', goal: c === '16' ? '>= 3x' : undefined });
      record({ bench: 'llm-proxy', name: `JSON c=${c} req/s vs direct`, value: a.rps, unit: 'req/s', ratio: a.rps / stat(`direct/${c}`).rps, against: 'direct to the upstream' });
    }
    console.log(`\nPortkey, a streamed call to the same upstream: ${portkeyStream}`);

    console.log('\n## llm-proxy: the floor of the path (bare Fastify -> grpc-js -> undici, no ABC logic), same rounds');
    console.log('| case | floor p50 ms | floor p50 vs direct | ABC p50 vs floor | floor req/s vs direct | ABC req/s vs floor |');
    console.log('|---|---|---|---|---|---|');
    for (const c of ['1', '16']) {
      const d = stat(`direct/${c}`);
      const f = stat(`floor/${c}`);
      const a = stat(`abc/${c}`);
      console.log(`| concurrency ${c} | ${fmt(f.p50)} | ${fmt(f.p50 / d.p50, 1)}x | ${fmt(a.p50 / f.p50)}x | ${fmt((100 * f.rps) / d.rps, 0)}% | ${fmt((100 * a.rps) / f.rps, 0)}% |`);
    }
    const dc = [...chunks.direct!].sort((a, b) => a - b);
    const ac = [...chunks.abc!].sort((a, b) => a - b);
    const fc = [...chunks.floor!].sort((a, b) => a - b);
    console.log(`\n## llm-proxy: streaming, ${CHUNKS} chunks per call`);
    console.log('| path | per-chunk p50 ms | per-chunk p99 ms |');
    console.log('|---|---|---|');
    console.log(`| direct | ${fmt(percentile(dc, 50))} | ${fmt(percentile(dc, 99))} |`);
    console.log(`| through ABC | ${fmt(percentile(ac, 50))} | ${fmt(percentile(ac, 99))} |`);
    console.log(`| through the floor chain | ${fmt(percentile(fc, 50))} | ${fmt(percentile(fc, 99))} |`);
    console.log(`| added by ABC | ${fmt(percentile(ac, 50) - percentile(dc, 50))} | ${fmt(percentile(ac, 99) - percentile(dc, 99))} |`);
    console.log(`| added by the floor chain | ${fmt(percentile(fc, 50) - percentile(dc, 50))} | ${fmt(percentile(fc, 99) - percentile(dc, 99))} |`);
    record({ bench: 'llm-proxy', name: 'streaming, added per chunk p50', value: percentile(ac, 50) - percentile(dc, 50), unit: 'ms', ratio: percentile(ac, 50) / percentile(dc, 50), against: 'direct per-chunk p50', goal: '<= 0.25 ms' });
    record({ bench: 'llm-proxy', name: 'streaming, floor chain added per chunk p50', value: percentile(fc, 50) - percentile(dc, 50), unit: 'ms', ratio: (percentile(ac, 50) - percentile(dc, 50)) / (percentile(fc, 50) - percentile(dc, 50)), against: 'ABC added / floor added' });
    // Streamed calls at c=16: interleaved rounds, each side's ratio to direct taken within its round.
    const s16: Record<'direct' | 'floor' | 'abc', number[]> = { direct: [], floor: [], abc: [] };
    const s16Ratios: Record<'floor' | 'abc', number[]> = { floor: [], abc: [] };
    for (let round = 0; round < STREAM_ROUNDS; round++) {
      const order: ['direct' | 'floor' | 'abc', Target][] = [['direct', direct], ['floor', floor], ['abc', viaAbc]];
      if (round % 2) order.reverse();
      const rps: Partial<Record<'direct' | 'floor' | 'abc', number>> = {};
      for (const [name, target] of order) rps[name] = (await loadCalls(STREAM_CALLS, 16, () => streamCall(target))).rps;
      for (const name of ['direct', 'floor', 'abc'] as const) s16[name].push(rps[name]!);
      for (const name of ['floor', 'abc'] as const) s16Ratios[name].push(rps[name]! / rps.direct!);
    }
    const [sd, sf, sa, rf, ra] = [median(s16.direct), median(s16.floor), median(s16.abc), median(s16Ratios.floor), median(s16Ratios.abc)];
    console.log(`\nstreamed calls (${CHUNKS} chunks) at concurrency 16, ${STREAM_ROUNDS} interleaved rounds of ${STREAM_CALLS} (medians; ratios within each round): direct ${fmt(sd, 0)} req/s, floor chain ${fmt(sf, 0)} req/s (${fmt(100 * rf, 0)}%), ABC ${fmt(sa, 0)} req/s (${fmt(100 * ra, 0)}%); ABC by round: ${s16Ratios.abc.map((r) => `${fmt(100 * r, 0)}%`).join(', ')}`);
    record({ bench: 'llm-proxy', name: 'streaming c=16 req/s, floor chain', value: sf, unit: 'req/s', ratio: rf, against: 'direct to the upstream' });
    record({ bench: 'llm-proxy', name: 'streaming c=16 req/s', value: sa, unit: 'req/s', ratio: ra, against: 'direct to the upstream', goal: '>= 0.25x' });

    const plain = stat('abc/1');
    const rec = stat('recorded/1');
    const plain16 = stat('abc/16');
    const rec16 = stat('recorded/16');
    console.log('\n## llm-proxy: the cost of recording llm_call_* events on a run');
    console.log('| case | unrecorded (API key) | recorded (run token) | ratio |');
    console.log('|---|---|---|---|');
    console.log(`| p50 ms, concurrency 1 | ${fmt(plain.p50)} | ${fmt(rec.p50)} | ${fmt(rec.p50 / plain.p50)}x |`);
    console.log(`| req/s, concurrency 16 | ${fmt(plain16.rps, 0)} | ${fmt(rec16.rps, 0)} | ${fmt(rec16.rps / plain16.rps)}x |`);
  } finally {
    run.close();
    floorServer.stop();
    portkeyServer.stop();
    await abc.stop();
    await db.close();
    upstream.stop();
  }
}
