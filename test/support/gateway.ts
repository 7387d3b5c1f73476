// A real gateway on a random port in front of a real core.
import WebSocket from 'ws';
import { startGateway, type Gateway, type StartGatewayOptions } from '../../gateway/server.js';
import { startTestCore, type TestCore } from './core.js';
import { testLogger } from './log.js';
import { freePort } from './ports.js';

/** A Response whose JSON body is untyped: tests assert on it. */
export type TestResponse = Omit<Response, 'json'> & { json(): Promise<any> };

export interface TestStack extends TestCore {
  gateway: Gateway;
  url: string;
  /** fetch against the gateway with the test API key. */
  http(path: string, init?: RequestInit & { json?: unknown; key?: string | null }): Promise<TestResponse>;
}

/** A gateway in front of a core whose agents are told the gateway's real URL (x-platform-base-url). */
export async function startTestStack(
  overrides: Parameters<typeof startTestCore>[0] = {},
  gatewayOverrides: Partial<Pick<StartGatewayOptions, 'corsOrigins' | 'authFailuresPerMinute'>> = {},
): Promise<TestStack> {
  const port = await freePort();
  const core = await startTestCore({ publicBaseUrl: `http://127.0.0.1:${port}`, ...overrides });
  const gateway = await startGateway({ coreAddr: core.core.address, host: '127.0.0.1', port, logger: testLogger(), ...gatewayOverrides });
  return {
    ...core,
    gateway,
    url: gateway.url,
    http: (path, init = {}) => {
      const { json, key, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (key !== null) headers.set('authorization', `Bearer ${key ?? core.key}`);
      if (json !== undefined) headers.set('content-type', 'application/json');
      return fetch(`${gateway.url}${path}`, { ...rest, headers, body: json !== undefined ? JSON.stringify(json) : rest.body }) as Promise<TestResponse>;
    },
    close: async () => {
      await gateway.close();
      await core.close();
    },
  };
}

/** A WebSocket IM client speaking JSON frames. */
export class WsClient {
  readonly frames: Record<string, any>[] = [];
  closed = false;
  readonly ws: WebSocket;
  #waiters: (() => void)[] = [];

  constructor(url: string, headers: Record<string, string> = {}) {
    this.ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/im`, { headers });
    this.ws.on('message', (data) => {
      this.frames.push(JSON.parse(data.toString()));
      this.#waiters.splice(0).forEach((w) => w());
    });
    this.ws.on('close', () => {
      this.closed = true;
      this.#waiters.splice(0).forEach((w) => w());
    });
  }

  async open(): Promise<this> {
    if (this.ws.readyState !== WebSocket.OPEN) await new Promise((resolve, reject) => this.ws.once('open', resolve).once('error', reject));
    return this;
  }

  send(frame: Record<string, unknown>): void {
    this.ws.send(JSON.stringify({ ts: Date.now(), ...frame }));
  }

  async until(predicate: (frames: Record<string, any>[]) => boolean, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.frames)) {
      if (this.closed) throw new Error(`socket closed; frames: ${JSON.stringify(this.frames.map((f) => f.type))}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out; frames: ${JSON.stringify(this.frames.map((f) => f.type))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiters.push(() => (clearTimeout(timer), resolve()));
      });
    }
  }

  async next(type: string, from = 0): Promise<Record<string, any>> {
    await this.until((f) => f.slice(from).some((x) => x.type === type));
    return this.frames.slice(from).find((x) => x.type === type)!;
  }

  of(type: string): Record<string, any>[] {
    return this.frames.filter((f) => f.type === type);
  }

  /** The text of every delta frame so far, in order: a frame may carry several of the agent's deltas. */
  text(): string {
    return this.of('delta').map((d) => d.text).join('');
  }

  close(): void {
    this.ws.close();
  }
}
