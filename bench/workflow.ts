// bench/workflow: one phase workflow turn over the IM WebSocket against the
// bare model stream it wraps (the same fake upstream, 20 chunks, called
// directly), in interleaved rounds of one run: the turn's added latency, time
// to first delta, and turns per second at concurrency 16.
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { benchDatabase, fmt, loadCalls, percentile, startAbc } from './lib.js';
import { startUpstream } from './llm-proxy.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const PER_ROUND = Number(process.env.BENCH_TURNS ?? 200);

const WORKFLOW = {
  workflow_id: 'bench',
  version: '1.0.0',
  initial_phase: 'chat',
  // A field nobody fills: every turn stays in the phase, as most turns of a real workflow do.
  phases: [{ id: 'chat', instructions: 'Answer briefly.', model: 'gpt-4', required_fields: ['never'] }],
  transitions: [],
};

interface Timing {
  first: number;
  total: number;
}

/** The bare model stream: the same request straight to the upstream. */
async function bareStream(url: string): Promise<Timing> {
  const start = performance.now();
  const res = await fetch(`${url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4', stream: true, messages: [{ role: 'user', content: 'Hello' }] }),
  });
  let first = 0;
  for await (const _ of res.body as unknown as AsyncIterable<Uint8Array>) first ||= performance.now() - start;
  return { first, total: performance.now() - start };
}

/** One IM connection that runs turns one after another, each in a new session. */
class Turns {
  readonly #ws: WebSocket;
  #waiting: { session: string; start: number; first: number; resolve: (t: Timing) => void; reject: (e: Error) => void } | null = null;
  #n = 0;

  constructor(url: string, readonly key: string) {
    this.#ws = new WebSocket(`${url.replace('http', 'ws')}/v1/im`);
    this.#ws.on('message', (data) => {
      const f = JSON.parse(data.toString()) as { type: string; session_id?: string; code?: string; message?: string };
      const w = this.#waiting;
      if (!w || f.session_id !== w.session) return;
      if (f.type === 'delta') w.first ||= performance.now() - w.start;
      if (f.type === 'done') {
        this.#waiting = null;
        w.resolve({ first: w.first, total: performance.now() - w.start });
      }
      if (f.type === 'error') {
        this.#waiting = null;
        w.reject(new Error(`${f.code}: ${f.message}`));
      }
    });
  }

  async open(): Promise<this> {
    await new Promise((r) => this.#ws.once('open', r));
    this.#ws.send(JSON.stringify({ type: 'hello', api_key: this.key, user_id: 'bench' }));
    return this;
  }

  turn(): Promise<Timing> {
    const session = `sess_wfb_${process.pid}_${Date.now()}_${this.#n++}_${Math.random().toString(36).slice(2, 8)}`;
    return new Promise((resolve, reject) => {
      this.#waiting = { session, start: performance.now(), first: 0, resolve, reject };
      this.#ws.send(JSON.stringify({ type: 'agent_invoke', session_id: session, agent_id: 'workflow:bench', message: { role: 'user', content: 'Hello' } }));
    });
  }

  close(): void {
    this.#ws.close();
  }
}

export async function workflow(): Promise<void> {
  const upstream = await startUpstream();
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;
  const db = await benchDatabase('abc_bench_workflow');
  const abc = await startAbc(db.url, { LLM_ROUTER_URL: upstreamUrl });
  const clients: Turns[] = [];
  try {
    const registered = await fetch(`${abc.http}/v1/workflows`, { method: 'POST', headers: { authorization: `Bearer ${abc.key}`, 'content-type': 'application/json' }, body: JSON.stringify(WORKFLOW) });
    if (registered.status !== 201) throw new Error(`workflow registration: HTTP ${registered.status}`);
    for (let i = 0; i < 16; i++) clients.push(await new Turns(abc.http, abc.key).open());
    const samples = { bare: [] as Timing[], turn: [] as Timing[] };
    const rps = { bare: [] as number[], turn: [] as number[] };
    // A connection runs one turn at a time: each call takes an idle one.
    const idle = [...clients];
    const turn = async () => {
      const client = idle.pop()!;
      try {
        return await client.turn();
      } finally {
        idle.push(client);
      }
    };
    const timed = async (kind: 'bare' | 'turn', n: number, concurrency: number) => {
      const out = await loadCalls(n, concurrency, async () => {
        const t = kind === 'bare' ? await bareStream(upstreamUrl) : await turn();
        if (concurrency === 1) samples[kind].push(t);
      });
      if (concurrency === 16) rps[kind].push(out.rps);
    };
    await timed('turn', 32, 16); // warm-up
    await timed('bare', 32, 16);
    for (let round = 0; round < ROUNDS; round++) {
      const order: ('bare' | 'turn')[] = round % 2 ? ['turn', 'bare'] : ['bare', 'turn'];
      for (const kind of order) {
        await timed(kind, PER_ROUND / 4, 1);
        await timed(kind, PER_ROUND, 16);
      }
    }
    const p = (xs: number[], q: number) => percentile([...xs].sort((a, b) => a - b), q);
    const first = (k: 'bare' | 'turn') => samples[k].map((t) => t.first);
    const total = (k: 'bare' | 'turn') => samples[k].map((t) => t.total);
    console.log(`\n## workflow: one turn over IM vs the bare model stream it wraps (${ROUNDS} interleaved rounds, 20 chunks)`);
    console.log('| measure | bare stream | workflow turn | added by ABC | ratio |');
    console.log('|---|---|---|---|---|');
    console.log(`| first delta p50 ms, c=1 | ${fmt(p(first('bare'), 50))} | ${fmt(p(first('turn'), 50))} | ${fmt(p(first('turn'), 50) - p(first('bare'), 50))} | ${fmt(p(first('turn'), 50) / p(first('bare'), 50), 1)}x |`);
    console.log(`| whole turn p50 ms, c=1 | ${fmt(p(total('bare'), 50))} | ${fmt(p(total('turn'), 50))} | ${fmt(p(total('turn'), 50) - p(total('bare'), 50))} | ${fmt(p(total('turn'), 50) / p(total('bare'), 50), 1)}x |`);
    console.log(`| whole turn p99 ms, c=1 | ${fmt(p(total('bare'), 99))} | ${fmt(p(total('turn'), 99))} | ${fmt(p(total('turn'), 99) - p(total('bare'), 99))} | ${fmt(p(total('turn'), 99) / p(total('bare'), 99), 1)}x |`);
    console.log(`| per second, c=16 | ${fmt(p(rps.bare, 50), 0)} | ${fmt(p(rps.turn, 50), 0)} | | ${fmt((100 * p(rps.turn, 50)) / p(rps.bare, 50), 0)}% |`);
  } finally {
    for (const c of clients) c.close();
    await abc.stop();
    await db.close();
    upstream.closeAllConnections();
    upstream.close();
  }
}
