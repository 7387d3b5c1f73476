// A minimal ABC agent: POST /invoke streams the reply word by word over SSE,
// GET /health reports health. Any language works the same way (seed 001 §6).
//   PORT=9001 npx tsx examples/echo-agent/server.ts
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const WORD_DELAY_MS = Number(process.env.WORD_DELAY_MS ?? 60);

export function createEchoAgent(): http.Server {
  return http.createServer(async (req, res) => {
    if (req.method === 'GET' && req.url === '/health') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ status: 'healthy', version: '1.0.0', capabilities: ['streaming'] }));
    }
    if (req.method !== 'POST' || req.url !== '/invoke') {
      res.writeHead(404).end();
      return;
    }
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const body = JSON.parse(raw) as { run_id: string; input_message: { content: string }; messages: unknown[] };
    const send = (event: string, data: unknown) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    let aborted = false;
    res.on('close', () => (aborted = true));

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    send('state', { state: 'thinking', detail: { turns_so_far: body.messages.length } });
    const words = `You said: ${body.input_message.content}`.split(' ');
    for (const [i, word] of words.entries()) {
      if (aborted) return; // ABC cancelled the run
      send('delta', { text: i === 0 ? word : ` ${word}`, run_id: body.run_id });
      await new Promise((r) => setTimeout(r, WORD_DELAY_MS));
    }
    send('done', { usage: { prompt_tokens: body.input_message.content.length, completion_tokens: words.length }, final_message: words.join(' ') });
    res.end();
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const server = createEchoAgent().listen(Number(process.env.PORT ?? 9001), '127.0.0.1', () => {
    console.log(`echo agent on http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
}
