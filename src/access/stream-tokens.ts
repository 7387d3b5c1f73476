// Stream tokens: short-lived, signed, read-only credentials for one run's or
// one session's event stream, for browsers (EventSource sends no headers).
// They are accepted only on the rows of the scope table that say so, and only
// for the run or session they name. Nothing is stored: the signature is the proof.
import { timingSafeEqual } from 'node:crypto';
import { invalidRequest } from '../domain/errors.js';
import type { KeyPrincipal, StreamPrincipal } from './principal.js';
import type { SecretBox } from './secret-box.js';

const PREFIX = 'abcst_';
const PURPOSE = 'stream tokens';
export const MAX_STREAM_TOKEN_TTL_S = 3600;
export const DEFAULT_STREAM_TOKEN_TTL_S = 300;

interface Claims {
  /** tenant, key, run, session, users, expiry (unix seconds) */
  t: string;
  k: string;
  r: string;
  s: string;
  u: readonly string[] | null;
  e: number;
}

export interface StreamTarget {
  runId: string;
  sessionId: string;
  ttlSeconds: number;
}

/** What a token is asked for, checked: exactly one of run and session, and a lifetime within bounds. */
export function streamTarget(runId: string, sessionId: string, ttlSeconds: number): StreamTarget {
  if (!runId === !sessionId) throw invalidRequest('name exactly one of run_id and session_id', 'run_id');
  const ttl = ttlSeconds || DEFAULT_STREAM_TOKEN_TTL_S;
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > MAX_STREAM_TOKEN_TTL_S) throw invalidRequest(`ttl_seconds must be 1-${MAX_STREAM_TOKEN_TTL_S}`, 'ttl_seconds');
  return { runId, sessionId, ttlSeconds: ttl };
}

export class StreamTokens {
  readonly #secrets: SecretBox;

  constructor(secrets: SecretBox) {
    this.#secrets = secrets;
  }

  /** A token for what `key` may read (checked by the caller): one run or one session, for `ttlSeconds` (default 300, at most 3600). */
  mint(key: KeyPrincipal, target: StreamTarget, now = Date.now()): { token: string; expiresAt: number } {
    const claims: Claims = { t: key.tenantId, k: key.keyId, r: target.runId, s: target.sessionId, u: key.userIds, e: Math.floor(now / 1000) + target.ttlSeconds };
    const body = Buffer.from(JSON.stringify(claims)).toString('base64url');
    return { token: `${PREFIX}${body}.${this.#secrets.mac(PURPOSE, body)}`, expiresAt: claims.e * 1000 };
  }

  /** The token's principal, or null when it is not one of ours, was tampered with, or has expired. */
  verify(token: string, now = Date.now()): StreamPrincipal | null {
    if (!token.startsWith(PREFIX)) return null;
    const [body, mac] = token.slice(PREFIX.length).split('.');
    if (!body || !mac) return null;
    const expected = Buffer.from(this.#secrets.mac(PURPOSE, body));
    const given = Buffer.from(mac);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return null;
    let claims: Claims;
    try {
      claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Claims;
    } catch {
      return null;
    }
    if (claims.e * 1000 <= now) return null;
    return { kind: 'stream', tenantId: claims.t, keyId: claims.k, runId: claims.r, sessionId: claims.s, userIds: claims.u };
  }
}

export const isStreamToken = (token: string) => token.startsWith(PREFIX);
