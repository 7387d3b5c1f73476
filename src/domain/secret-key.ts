// The key that seals secrets at rest: 32 bytes, as hex or base64.

/** Parses ABC_SECRET_KEY: 32 bytes as 64 hex digits or as base64. */
export function parseSecretKey(raw: string): { value: Buffer } | { error: string } {
  const key = /^[0-9a-f]{64}$/i.test(raw) ? Buffer.from(raw, 'hex') : Buffer.from(raw, 'base64');
  return key.length === 32 ? { value: key } : { error: 'must be 32 bytes, as 64 hex digits or base64 (openssl rand -hex 32)' };
}
