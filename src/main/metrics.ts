// The core's metrics that are read when scraped (the contract queue, the
// database pools), and the optional listener of a standalone core's /metrics.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import type { HostPort } from '../config.js';
import { registry, scrapedGauge } from '../runtime/metrics.js';
import type { Orm } from '../store/orm.js';
import { nativePool } from '../store/native.js';
import { queueStats } from '../store/ticket-queue.js';

/** Registers the gauges read at each scrape. */
export async function watchResources(orm: Orm, readOnly: pg.Pool): Promise<void> {
  const pools = { orm: await nativePool(orm), read_only: readOnly };
  scrapedGauge('abc_db_pool_connections', 'Connections of the core’s database pools, by pool and state (total, idle, waiting clients)', ['pool', 'state'], (set) => {
    for (const [pool, p] of Object.entries(pools)) {
      set({ pool, state: 'total' }, p.totalCount);
      set({ pool, state: 'idle' }, p.idleCount);
      set({ pool, state: 'waiting' }, p.waitingCount);
    }
  });
  // One read serves both queue gauges of a scrape.
  let stats: Promise<{ depth: number; oldestSeconds: number }> | undefined;
  const read = () =>
    (stats ??= queueStats(orm.em.fork())
      .catch(() => ({ depth: 0, oldestSeconds: 0 }))
      .finally(() => void setTimeout(() => (stats = undefined), 1000).unref()));
  scrapedGauge('abc_contract_queue_depth', 'Contract jobs ready to run that no worker has taken', [], async (set) => set({}, (await read()).depth));
  scrapedGauge('abc_contract_queue_oldest_seconds', 'How long the oldest ready contract job has waited', [], async (set) => set({}, (await read()).oldestSeconds));
}

/** GET /metrics on its own address, for a core that runs without a gateway in front of its scraper. */
export async function serveMetrics(addr: HostPort): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') return void res.writeHead(404).end();
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      () => res.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(addr.port, addr.host, resolve));
  const { address, port } = server.address() as AddressInfo;
  return { url: `http://${address}:${port}/metrics`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}
