import { randomFillSync } from 'node:crypto';
import { makeId } from '../domain/ids.js';

// Random bytes are drawn from a pool refilled in bulk: one call per 680 ids, not one per id.
const pool = Buffer.alloc(4080);
let offset = pool.length;

/** `bytes` random bytes as hex, from the pool. */
export function randomHex(bytes: number): string {
  if (offset + bytes > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  offset += bytes;
  return pool.toString('hex', offset - bytes, offset);
}

/** A new sortable identifier such as `run_0m3x9k2a1b4f9c0d2e7a1b`. */
export const newId = (prefix: string) => makeId(prefix, Date.now(), randomHex(6));
