// bench/pep: what the one policy enforcement point costs. Two ABC processes on
// one database, side by side in interleaved rounds: one with no policy, one
// with a 50-rule policy (none matching before the last), a model allow-list and
// token budgets. Measured: agents' tool calls (the built-in echo, through the
// gateway with a run token) and run-linked LLM calls (JSON, through the proxy).
import type { AddressInfo } from 'node:net';
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { benchDatabase, fmt, loadCalls, median, percentile, startAbc, type AbcProcess } from './lib.js';
import { runToken, startUpstream } from './llm-proxy.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const PER_ROUND = Number(process.env.BENCH_REQUESTS ?? 600);

const POLICY = {
  version: 1,
  default: 'block',
  budgets: { run_tokens: 1e12, tenant_tokens_per_day: 1e12 },
  rules: [
    ...Array.from({ length: 50 }, (_, i) => ({ id: `r${i}`, tools: [`other.${i}.*`], when: { args: { amount: { gt: i } }, tenants: ['default'] }, decision: 'require_approval' })),
    { id: 'models', tools: ['gpt-4', 'gpt-4o-mini'], when: { actions: ['llm_call'] }, decision: 'allow' },
    { id: 'echo', tools: ['echo'], when: { actions: ['tool_call'] }, decision: 'allow' },
  ],
};

type Side = { name: string; abc: AbcProcess; run: { runId: string; token: string; close(): void } };

const toolCall = (side: Side, round: number) => async (i: number) => {
  const res = await fetch(`${side.abc.http}/v1/tools/echo:invoke`, {
    method: 'POST',
    headers: { authorization: `Bearer ${side.run.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ run_id: side.run.runId, args: { round, i } }),
  });
  if (res.status !== 200) throw new Error(`tool call answered ${res.status}: ${await res.text()}`);
  await res.arrayBuffer();
};

const BODY = JSON.stringify({ model: 'gpt-4', messages: [{ role: 'user', content: 'Say something short.' }] });
const llmCall = (side: Side) => async () => {
  const res = await fetch(`${side.abc.http}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${side.run.token}`, 'content-type': 'application/json' },
    body: BODY,
  });
  if (res.status !== 200) throw new Error(`LLM call answered ${res.status}: ${await res.text()}`);
  await res.arrayBuffer();
};

export async function pep(): Promise<void> {
  const upstream = await startUpstream();
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;
  const policyFile = path.join(os.tmpdir(), `abc-bench-policy-${Date.now()}.json`);
  await writeFile(policyFile, JSON.stringify(POLICY));
  const db = await benchDatabase('abc_bench_pep');
  const sides: Side[] = [];
  try {
    for (const [name, env] of [['no policy', {}], ['policy', { ABC_POLICY_FILE: policyFile }]] as const) {
      const abc = await startAbc(db.url, { LLM_ROUTER_URL: upstreamUrl, ...env });
      sides.push({ name, abc, run: await runToken(abc) });
    }
    for (const side of sides) {
      await loadCalls(200, 8, toolCall(side, -1));
      await loadCalls(200, 8, llmCall(side));
    }
    const results: Record<string, { latencies: number[]; rps: number[] }> = {};
    const add = (key: string, r: { latencies: number[]; rps: number }) => {
      results[key] ??= { latencies: [], rps: [] };
      results[key].latencies.push(...r.latencies);
      results[key].rps.push(r.rps);
    };
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 ? [...sides].reverse() : sides;
      for (const side of order) {
        add(`tool/${side.name}/1`, await loadCalls(PER_ROUND / 4, 1, toolCall(side, round * 2)));
        add(`tool/${side.name}/16`, await loadCalls(PER_ROUND, 16, toolCall(side, round * 2 + 1)));
        add(`llm/${side.name}/1`, await loadCalls(PER_ROUND / 4, 1, llmCall(side)));
        add(`llm/${side.name}/16`, await loadCalls(PER_ROUND, 16, llmCall(side)));
      }
    }
    const stat = (key: string) => {
      const sorted = [...results[key]!.latencies].sort((a, b) => a - b);
      return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), rps: median(results[key]!.rps) };
    };
    console.log(`\n## pep: the policy's cost on tool calls and LLM calls (${ROUNDS} interleaved rounds)`);
    console.log('| path | concurrency | no policy p50 / p99 ms | policy p50 / p99 ms | p50 ratio | no policy req/s | policy req/s | req/s ratio |');
    console.log('|---|---|---|---|---|---|---|---|');
    for (const path of ['tool', 'llm']) {
      for (const c of [1, 16]) {
        const a = stat(`${path}/no policy/${c}`);
        const b = stat(`${path}/policy/${c}`);
        console.log(`| ${path === 'tool' ? 'tool call (echo)' : 'LLM call (JSON, run-linked)'} | ${c} | ${fmt(a.p50)} / ${fmt(a.p99)} | ${fmt(b.p50)} / ${fmt(b.p99)} | ${fmt(b.p50 / a.p50)}× | ${fmt(a.rps, 0)} | ${fmt(b.rps, 0)} | ${fmt(b.rps / a.rps)} |`);
      }
    }
  } finally {
    for (const side of sides) {
      side.run.close();
      await side.abc.stop();
    }
    upstream.closeAllConnections();
    upstream.close();
    await db.close();
  }
}
