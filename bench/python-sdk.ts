// bench/python-sdk: what the Python SDK adds to one call, over HTTP and over
// gRPC, against the raw urllib and grpcio calls it wraps, on the same ABC in
// the same run (bench/python_sdk.py does the calling).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { benchDatabase, fmt, startAbc } from './lib.js';

const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

export async function pythonSdk(): Promise<void> {
  if (spawnSync(PYTHON, ['-c', 'import grpc, google.protobuf'], { encoding: 'utf8' }).status !== 0) {
    console.log('\n## python-sdk: skipped (needs Python 3 with grpcio and protobuf: Debian python3-grpcio python3-protobuf)');
    return;
  }
  const db = await benchDatabase('abc_bench_python_sdk');
  const abc = await startAbc(db.url);
  try {
    const put = await fetch(`${abc.http}/v1/context`, {
      method: 'POST',
      headers: { authorization: `Bearer ${abc.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ owner_type: 'session', owner_id: 'bench', data: { n: 2, items: [1, 2, 3], note: 'a small document' } }),
    });
    const key = ((await put.json()) as { blob: { context_key: string } }).blob.context_key;
    const run = spawnSync(PYTHON, ['bench/python_sdk.py', abc.http, abc.grpc, abc.key, key], { encoding: 'utf8', env: process.env, maxBuffer: 1 << 20 });
    if (run.status !== 0) throw new Error(`bench/python_sdk.py failed: ${run.stderr}`);
    const r = JSON.parse(run.stdout) as Record<'raw_http' | 'sdk_http' | 'raw_grpc' | 'sdk_grpc', { p50: number; p99: number; n: number }>;
    console.log(`\n## python-sdk: one GetContext call, the SDK against the raw call it wraps (${r.raw_http.n} calls each, interleaved rounds, µs)`);
    console.log('| transport | raw p50 | SDK p50 | added p50 | raw p99 | SDK p99 | ratio p50 |');
    console.log('|---|---|---|---|---|---|---|');
    for (const [name, raw, sdk] of [['HTTP (urllib)', r.raw_http, r.sdk_http], ['gRPC (grpcio)', r.raw_grpc, r.sdk_grpc]] as const) {
      console.log(`| ${name} | ${fmt(raw.p50, 0)} | ${fmt(sdk.p50, 0)} | ${fmt(sdk.p50 - raw.p50, 0)} | ${fmt(raw.p99, 0)} | ${fmt(sdk.p99, 0)} | ${fmt(sdk.p50 / raw.p50, 2)}x |`);
    }
  } finally {
    await abc.stop();
    await db.close();
  }
}
