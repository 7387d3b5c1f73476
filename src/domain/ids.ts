// Identifiers: a prefix, a time component that sorts, and randomness.
// Pure: the caller supplies time and random bytes.

/** `${prefix}_` + 10 base36 chars of milliseconds + 12 hex chars of randomness. */
export function makeId(prefix: string, nowMs: number, randomHex: string): string {
  return `${prefix}_${nowMs.toString(36).padStart(10, '0')}${randomHex.slice(0, 12)}`;
}

/** A caller's own trace id, when it is a W3C trace id (32 lowercase hex digits, not all zeros). */
export const w3cTraceId = (id: unknown): string | undefined => (typeof id === 'string' && /^[\da-f]{32}$/.test(id) && !/^0+$/.test(id) ? id : undefined);

/** The owner of the platform's catalogue (tools, contracts, assemblies) and policy: every tenant sees them, under its own. */
export const PLATFORM_TENANT = '*';
