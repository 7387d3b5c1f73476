// TLS: the gateway serves HTTPS and WSS, the core gRPC over TLS, and with a CA
// the two speak mutual TLS: the core refuses a client without a certificate
// its CA signed.
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { credentials } from '@grpc/grpc-js';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HealthCheckResponse_ServingStatus, HealthClient } from '../../gen/grpc/health/v1/health.js';
import { AgentServiceClient } from '../../gen/abc/orchestrator/v1/agent.js';
import { startGateway, type Gateway } from '../../gateway/server.js';
import { startTestCore, type TestCore } from '../support/core.js';
import { failure, unary, withKey } from '../support/grpc.js';
import { testLogger } from '../support/log.js';

const fixture = (name: string) => readFileSync(path.resolve('test/fixtures/tls', name));
const tls = { cert: fixture('cert.pem'), key: fixture('key.pem'), ca: fixture('ca.pem') };
let t: TestCore;
let gateway: Gateway;

beforeAll(async () => {
  t = await startTestCore({ tls });
  gateway = await startGateway({ coreAddr: t.core.address.replace('127.0.0.1', 'localhost'), host: '127.0.0.1', port: 0, logger: testLogger(), tls });
});
afterAll(async () => {
  await gateway?.close();
  await t?.close();
});

const get = (url: string, key: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    https.get(url, { ca: tls.ca, headers: { authorization: `Bearer ${key}` } }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject);
  });

describe('TLS', () => {
  it('serves HTTPS through mutual TLS to the core', async () => {
    expect(gateway.url).toMatch(/^https:/);
    expect(await get(`${gateway.url}/ready`, t.key)).toMatchObject({ status: 200 });
    const agents = await get(`${gateway.url}/v1/agents`, t.key);
    expect(agents.status).toBe(200);
    expect(JSON.parse(agents.body)).toEqual({ agents: [] });
  });

  it('serves the IM WebSocket over WSS', async () => {
    const ws = new WebSocket(`${gateway.url.replace(/^https/, 'wss')}/v1/im`, { ca: tls.ca });
    await new Promise<void>((resolve, reject) => ws.once('open', resolve).once('error', reject));
    ws.send(JSON.stringify({ type: 'hello', api_key: t.key, user_id: 'u' }));
    const frame = await new Promise<Record<string, unknown>>((resolve) => ws.once('message', (m) => resolve(JSON.parse(String(m)))));
    expect(frame.type).toBe('hello_ack');
    ws.close();
  });

  it('refuses a gRPC client with no certificate, a plain one, or one another CA signed', async () => {
    const address = t.core.address.replace('127.0.0.1', 'localhost');
    const check = (creds: ReturnType<typeof credentials.createInsecure>) => {
      const client = new AgentServiceClient(address, creds);
      return failure(unary(client.listAgents.bind(client), {}, withKey(t.key))).finally(() => client.close());
    };
    for (const creds of [
      credentials.createInsecure(),
      credentials.createSsl(tls.ca),
      credentials.createSsl(tls.ca, fixture('stranger-key.pem'), fixture('stranger.pem')),
    ]) {
      expect((await check(creds)).code).toBe(14); // UNAVAILABLE: the handshake fails
    }
    const health = new HealthClient(address, credentials.createSsl(tls.ca, tls.key, tls.cert));
    const res = await unary(health.check.bind(health), { service: '' });
    expect(res.status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    health.close();
  });
});
