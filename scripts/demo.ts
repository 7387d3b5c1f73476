// npm run demo: starts ABC (embedded PostgreSQL), starts the echo agent,
// registers it, sends one message over the IM WebSocket and prints the frames.
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import WebSocket from 'ws';
import { createEchoAgent } from '../examples/echo-agent/server.js';

const dataDir = path.resolve(process.env.ABC_DATA_DIR ?? '.abc/demo');
const abc = spawn(process.execPath, ['bin/abc.js', 'serve'], {
  env: { ...process.env, ABC_DATA_DIR: dataDir, ABC_HTTP_ADDR: '127.0.0.1:0', ABC_GRPC_ADDR: '127.0.0.1:0', LOG_LEVEL: 'info' },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const stop = async (code: number) => {
  abc.kill('SIGTERM');
  await new Promise((r) => abc.once('exit', r));
  process.exit(code);
};

const baseUrl = await new Promise<string>((resolve, reject) => {
  let buffer = '';
  abc.stdout.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    for (const line of buffer.split('\n')) {
      if (line.includes('"ABC is ready"')) resolve(JSON.parse(line).http);
    }
  });
  abc.once('exit', (code) => reject(new Error(`abc serve exited with ${code}`)));
});
const key = (await readFile(path.join(dataDir, 'dev-api-key'), 'utf8')).trim();
console.log(`ABC is up at ${baseUrl}`);

const agent = createEchoAgent().listen(0, '127.0.0.1');
await new Promise((r) => agent.once('listening', r));
const agentUrl = `http://127.0.0.1:${(agent.address() as AddressInfo).port}`;
const registered = await fetch(`${baseUrl}/v1/agents/register`, {
  method: 'POST',
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
  body: JSON.stringify({ agent_id: 'echo', name: 'Echo agent', endpoint: agentUrl, capabilities: ['streaming'] }),
});
console.log(`registered the echo agent at ${agentUrl}: HTTP ${registered.status}\n`);

const ws = new WebSocket(`${baseUrl.replace('http', 'ws')}/v1/im`);
await new Promise((r) => ws.once('open', r));
ws.send(JSON.stringify({ type: 'hello', ts: Date.now(), user_id: 'demo-user', api_key: key }));
ws.send(JSON.stringify({
  type: 'agent_invoke', ts: Date.now(), request_id: `req_${Date.now()}`, session_id: `sess_demo_${Date.now()}`,
  agent_id: 'echo', message: { role: 'user', content: 'Hello ABC, please stream this back to me' },
}));
ws.on('message', async (data) => {
  const frame = JSON.parse(data.toString());
  console.log(`<- ${JSON.stringify(frame)}`);
  if (frame.type !== 'done' && frame.type !== 'error') return;
  ws.close();
  agent.close();
  const replay = await fetch(`${baseUrl}/v1/runs/${frame.run_id}/events?limit=100`, { headers: { authorization: `Bearer ${key}` } });
  const { events } = (await replay.json()) as { events: { seq: number; type: string }[] };
  console.log(`\nthe run as recorded (GET /v1/runs/${frame.run_id}/events):`);
  for (const e of events) console.log(`  #${e.seq} ${e.type}`);
  await stop(frame.type === 'done' ? 0 : 1);
});
