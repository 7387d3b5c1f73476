// A real HTTP server hosting scripted webhook tools: POST /{tool} answers each
// call with the next scripted reply (the last one repeats). A reply may hold
// the call until the test lets it go. Every call is recorded.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Reply {
  status?: number;
  body?: unknown;
  delayMs?: number;
  /** Answer only when `release(tool)` is called. */
  hold?: boolean;
}

export interface ToolServer {
  url: string;
  endpoint(tool: string): string;
  script(tool: string, ...replies: Reply[]): void;
  calls(tool: string): Record<string, unknown>[];
  /** Held calls waiting for release. */
  held(tool: string): number;
  release(tool: string): void;
  close(): Promise<void>;
}

/** A tool error the engine reads as a StructuredError. */
export const toolError = (code: string, suggested_action: string, extra: Record<string, unknown> = {}): Reply => ({
  status: 500,
  body: { error: { code, message: `${code} from the tool`, suggested_action, ...extra } },
});

export async function startToolServer(): Promise<ToolServer> {
  const scripts = new Map<string, Reply[]>();
  const calls = new Map<string, Record<string, unknown>[]>();
  const waiting = new Map<string, (() => void)[]>();
  const server = http.createServer(async (req, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const tool = (req.url ?? '/').slice(1);
    const list = calls.get(tool) ?? [];
    list.push(JSON.parse(raw || '{}'));
    calls.set(tool, list);
    const script = scripts.get(tool) ?? [{ body: { ok: true } }];
    const reply = script[Math.min(list.length - 1, script.length - 1)]!;
    if (reply.hold) await new Promise<void>((r) => waiting.set(tool, [...(waiting.get(tool) ?? []), r]));
    if (reply.delayMs) await new Promise((r) => setTimeout(r, reply.delayMs));
    if (res.destroyed) return;
    res.writeHead(reply.status ?? 200, { 'content-type': 'application/json' }).end(JSON.stringify(reply.body ?? { ok: true }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    endpoint: (tool) => `${url}/${tool}`,
    script: (tool, ...replies) => void scripts.set(tool, replies),
    calls: (tool) => calls.get(tool) ?? [],
    held: (tool) => waiting.get(tool)?.length ?? 0,
    release: (tool) => {
      for (const r of waiting.get(tool) ?? []) r();
      waiting.set(tool, []);
    },
    close: async () => {
      for (const list of waiting.values()) for (const r of list) r();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
