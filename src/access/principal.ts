// Who is calling: a client holding an API key, or an agent holding its run's token.
// Every resource belongs to a tenant; another tenant's resource is not found.
import { AbcError, notFound } from '../domain/errors.js';

export const DEFAULT_TENANT = 'default';

export type Principal =
  | {
      kind: 'key';
      keyId: string;
      name: string;
      tenantId: string;
      scopes: readonly string[];
      /** The IM users the key may speak for; null means any user of its tenant. */
      userIds: readonly string[] | null;
    }
  /** An agent acting within one run (and its session) through the run's scoped token. */
  | { kind: 'run'; runId: string; sessionId: string; agentId: string; tenantId: string }
  /** A browser reading one run's or one session's events with a stream token (access/stream-tokens.ts). */
  | { kind: 'stream'; tenantId: string; keyId: string; runId: string; sessionId: string; userIds: readonly string[] | null };

export type KeyPrincipal = Extract<Principal, { kind: 'key' }>;
export type StreamPrincipal = Extract<Principal, { kind: 'stream' }>;

export function requireKey(principal: Principal | null): KeyPrincipal {
  if (principal?.kind === 'key') return principal;
  throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: 'this call needs an API key; a run token is not enough' });
}

/** The tenant a call acts in. A call with no credential has none, so it sees nothing. */
export const tenantOf = (principal: Principal | null): string => principal?.tenantId ?? '';

/** Whether the key (or a stream token it minted) may speak for `userId`. */
export const speaksFor = (principal: KeyPrincipal | StreamPrincipal, userId: string) => principal.userIds === null || principal.userIds.includes(userId);

/** A session as access sees it. */
export interface SessionOwner {
  sessionId: string;
  tenantId: string;
  userId: string;
}

/**
 * A session the caller may use: its tenant's, of a user its key speaks for,
 * or its own run's. Anything else is not found, so its existence never leaks;
 * a run token reaching past its session is forbidden, as before tenants.
 */
export function requireSession(principal: Principal | null, session: SessionOwner | null | undefined, sessionId: string): void {
  if (principal?.kind === 'run') {
    if (principal.sessionId === sessionId) return;
    throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: `no access to session ${sessionId}` });
  }
  if (principal?.kind === 'stream' && principal.sessionId !== sessionId) throw notFound('session', sessionId);
  if (!principal || !session || session.tenantId !== principal.tenantId || !speaksFor(principal, session.userId)) throw notFound('session', sessionId);
}

/** A run as access sees it. */
export interface RunOwner {
  runId: string;
  sessionId: string;
  parentRunId: string | null;
  tenantId: string;
  userId: string | null;
}

/**
 * Whether the caller may see a run: in its tenant and, for a key pinned to
 * users, one of theirs; a run token sees its own run and the child runs it started.
 */
export function seesRun(principal: Principal | null, run: RunOwner | null | undefined): boolean {
  if (!run || !principal || run.tenantId !== principal.tenantId) return false;
  if (principal.kind === 'run') return run.runId === principal.runId || run.parentRunId === principal.runId;
  if (principal.kind === 'stream' && run.runId !== principal.runId && run.sessionId !== principal.sessionId) return false;
  return principal.userIds === null || (run.userId !== null && principal.userIds.includes(run.userId));
}

/** The run, when the caller may see it; else `what` (the run, or what was asked for through it) is not found. */
export function requireRun<T extends RunOwner>(principal: Principal | null, run: T | null | undefined, id: string, what = 'run'): T {
  if (!run || !seesRun(principal, run)) throw notFound(what, id);
  return run;
}

/** Who a key speaks for when the call names nobody: its one pinned user, else the key itself. */
export const defaultUser = (principal: KeyPrincipal): string => (principal.userIds?.length === 1 ? principal.userIds[0]! : principal.keyId);
