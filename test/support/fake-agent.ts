// A real HTTP agent for tests: POST /invoke answers SSE, GET /health answers JSON.
// Each test scripts its behaviour; every invocation is recorded.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { InvokeBody } from '../../sdk/typescript/src/index.js';

export interface Invocation {
  headers: http.IncomingHttpHeaders;
  body: InvokeBody;
  /** Resolves when the caller closes the connection (abort or end). */
  closed: Promise<void>;
}

export type Behaviour = (inv: Invocation, res: ServerResponse, req: IncomingMessage) => Promise<void> | void;

export interface FakeAgent {
  url: string;
  invocations: Invocation[];
  behave(behaviour: Behaviour): void;
  /** Status code GET /health answers; 0 destroys the socket. */
  health: number;
  close(): Promise<void>;
}

export function sse(res: ServerResponse, event: string, data: unknown): boolean {
  if (!res.headersSent) res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  return res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

/** Replies word by word, then done with usage. */
export const echo: Behaviour = (inv, res) => {
  const words = `echo: ${inv.body.input_message.content}`.split(' ');
  words.forEach((w, i) => sse(res, 'delta', { text: i === 0 ? w : ` ${w}`, run_id: inv.body.run_id }));
  sse(res, 'done', { usage: { prompt_tokens: 3, completion_tokens: words.length }, final_message: words.join(' ') });
  res.end();
};

export async function startFakeAgent(behaviour: Behaviour = echo): Promise<FakeAgent> {
  let current = behaviour;
  const invocations: Invocation[] = [];
  const agent: FakeAgent = {
    url: '',
    invocations,
    health: 200,
    behave: (b) => (current = b),
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
  const server = http.createServer(async (req, res) => {
    if (req.method === 'GET' && req.url === '/health') {
      if (agent.health === 0) return req.socket.destroy();
      res.writeHead(agent.health, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ status: agent.health === 200 ? 'healthy' : 'unhealthy', version: '1.0.0', capabilities: ['streaming'] }));
    }
    if (req.method !== 'POST' || req.url !== '/invoke') {
      res.writeHead(404);
      return res.end();
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const inv: Invocation = {
      headers: req.headers,
      body: JSON.parse(Buffer.concat(chunks).toString()),
      closed: new Promise((resolve) => res.on('close', () => resolve())),
    };
    invocations.push(inv);
    try {
      await current(inv, res, req);
    } catch {
      res.destroy();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  agent.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return agent;
}
