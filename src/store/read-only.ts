// A pool whose every session is read-only (default_transaction_read_only): the
// database itself refuses any write made through it. Read-only projections,
// such as the contract poll, run here.
import pg from 'pg';
import { CONNECT_TIMEOUT_MS } from './orm.js';

export function readOnlyPool(url: string, max = 4, idleTimeoutMillis?: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max, idleTimeoutMillis, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, options: '-c default_transaction_read_only=on' });
  pool.on('error', () => {}); // an idle client's error; the next query reconnects
  return pool;
}
