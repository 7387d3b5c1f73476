// Who is calling: a client holding an API key, or an agent holding its run's token.
import { AbcError } from '../domain/errors.js';

export type Principal =
  | { kind: 'key'; keyId: string; name: string }
  /** An agent acting within one run (and its session) through the run's scoped token. */
  | { kind: 'run'; runId: string; sessionId: string; agentId: string };

export function requireKey(principal: Principal | null): Extract<Principal, { kind: 'key' }> {
  if (principal?.kind === 'key') return principal;
  throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: 'this call needs an API key; a run token is not enough' });
}

/** API keys may act on any session; a run token only on its own run's session. */
export function requireSession(principal: Principal | null, sessionId: string): void {
  if (principal?.kind === 'key') return;
  if (principal?.kind === 'run' && principal.sessionId === sessionId) return;
  throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: `no access to session ${sessionId}` });
}
