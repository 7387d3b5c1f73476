// Identifiers: a prefix, a time component that sorts, and randomness.
// Pure: the caller supplies time and random bytes.

/** `${prefix}_` + 10 base36 chars of milliseconds + 12 hex chars of randomness. */
export function makeId(prefix: string, nowMs: number, randomHex: string): string {
  return `${prefix}_${nowMs.toString(36).padStart(10, '0')}${randomHex.slice(0, 12)}`;
}
