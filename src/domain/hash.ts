// Canonical JSON and its SHA-256: the identity of a request, arguments or a plan,
// independent of key order.
import { hash } from 'node:crypto';

const canonical = (v: unknown): unknown =>
  Array.isArray(v)
    ? v.map(canonical)
    : v && typeof v === 'object'
      ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical((v as Record<string, unknown>)[k])]))
      : v;

/** JSON with object keys sorted at every level. */
export const canonicalJson = (value: unknown): string => JSON.stringify(canonical(value));

/** One-shot (crypto.hash): no Hash object per call, as every request hashes its credential. */
export const sha256 = (s: string): string => hash('sha256', s, 'hex');

/** SHA-256 of the canonical JSON of `value`. */
export const canonicalHash = (value: unknown): string => sha256(canonicalJson(value));
