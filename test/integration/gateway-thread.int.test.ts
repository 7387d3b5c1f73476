// `abc serve`'s gateway thread: a real gateway on its own thread, over gRPC to a real core.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayThread } from '../../src/main/gateway-thread.js';
import { defaultConfig, gatewaySettings } from '../../src/config.js';
import { startTestCore, type TestCore } from '../support/core.js';

let t: TestCore;
beforeAll(async () => {
  t = await startTestCore();
});
afterAll(() => t.close());

const start = (onCrash: (error: Error) => void = () => {}) =>
  startGatewayThread({ coreAddr: t.core.address, host: '127.0.0.1', port: 0, logLevel: 'silent', ...gatewaySettings(defaultConfig()) }, onCrash);

describe('the gateway thread', () => {
  it('serves HTTP through the core, and closes without reporting a crash', async () => {
    const crashes: Error[] = [];
    const gateway = await start((e) => crashes.push(e));
    expect((await fetch(`${gateway.url}/ready`)).status).toBe(200);
    const agents = await fetch(`${gateway.url}/v1/agents`, { headers: { authorization: `Bearer ${t.key}` } });
    expect(agents.status).toBe(200);
    expect((await fetch(`${gateway.url}/v1/agents`)).status).toBe(401);
    await gateway.close();
    await expect(fetch(`${gateway.url}/health`)).rejects.toThrow();
    expect(crashes).toEqual([]);
  });

  it('reports a thread that ends on its own, and still closes', async () => {
    let crashed: (error: Error) => void;
    const crash = new Promise<Error>((resolve) => (crashed = resolve));
    const gateway = await start((e) => crashed(e));
    await gateway.thread.terminate();
    expect((await crash).message).toMatch(/exited with code 1/);
    await gateway.close();
  });

  it('fails to start when it cannot listen', async () => {
    const first = await start();
    const port = Number(new URL(first.url).port);
    await expect(startGatewayThread({ coreAddr: t.core.address, host: '127.0.0.1', port, logLevel: 'silent', ...gatewaySettings(defaultConfig()) }, () => {})).rejects.toThrow(/EADDRINUSE/);
    await first.close();
  });
});
