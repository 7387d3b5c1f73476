import { randomBytes } from 'node:crypto';
import { makeId } from './domain/ids.js';

/** A new sortable identifier such as `run_0m3x9k2a1b4f9c0d2e7a1b`. */
export const newId = (prefix: string) => makeId(prefix, Date.now(), randomBytes(6).toString('hex'));
