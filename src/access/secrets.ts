// Secrets for connectors: a webhook tool names a secret (`{"auth": {"type":
// "bearer", "secret": "crm"}}`) and ABC sends its current value. Values are
// sealed at rest with ABC_SECRET_KEY, write-only over the API, and never put
// in events, logs or responses. A new version is used at once; the one it
// replaces stays usable by its explicit version (`crm@1`) for a grace period,
// then is refused.
import { AbcError, invalidRequest } from '../domain/errors.js';
import type { Orm } from '../store/orm.js';
import { insertSecretVersion, listSecretVersions, usableSecretVersion, type SecretVersion } from '../store/secret-store.js';
import type { SecretBox } from './secret-box.js';

const NAME = /^[A-Za-z0-9._:-]{1,128}$/;
/** A reference: a name, or name@version. */
const REF = /^([A-Za-z0-9._:-]{1,128})(?:@(\d{1,9}))?$/;
/** How an agent's stored credential names its secret. */
const AGENT_REF = 'secret:';
export const MAX_SECRET_BYTES = 16 * 1024;

export type SecretInfo = Omit<SecretVersion, 'sealed'>;

export class Secrets {
  readonly #orm: Orm;
  readonly #box: SecretBox;
  readonly #graceMs: number;

  constructor(orm: Orm, box: SecretBox, graceMs: number) {
    this.#orm = orm;
    this.#box = box;
    this.#graceMs = graceMs;
  }

  /** Stores a new version; the previous one retires after the grace period. */
  async put(tenantId: string, name: string, value: string): Promise<SecretInfo> {
    if (!NAME.test(name)) throw invalidRequest('a secret name is 1-128 of A-Z a-z 0-9 . _ : -', 'name');
    if (!value) throw invalidRequest('value is required', 'value');
    if (Buffer.byteLength(value) > MAX_SECRET_BYTES) throw invalidRequest(`value is larger than ${MAX_SECRET_BYTES} bytes`, 'value');
    const stored = await this.#orm.em.fork().transactional((tx) => insertSecretVersion(tx, tenantId, name, this.#box.seal(value), this.#graceMs));
    return info(stored);
  }

  async list(tenantId: string): Promise<SecretInfo[]> {
    return (await listSecretVersions(this.#orm.em.fork(), tenantId)).map(info);
  }

  /** The value a reference names, for a call of `tenantId`; a missing or retired one is refused. */
  async resolve(tenantId: string, ref: string): Promise<string> {
    const m = REF.exec(ref);
    const found = m ? await usableSecretVersion(this.#orm.em.fork(), tenantId, m[1]!, m[2] === undefined ? undefined : Number(m[2])) : undefined;
    if (!found) {
      throw new AbcError('FAILED_PRECONDITION', { code: 'secret_unavailable', category: 'AUTH', message: `secret ${ref.slice(0, 140)} does not exist or has been retired`, retryable: false, details: { secret: ref.slice(0, 140) } });
    }
    return this.#box.open(found.sealed);
  }

  /**
   * What an agent's registration stores for its bearer token: a token becomes
   * the next version of the secret `agent.<agent_id>` (so re-registering rotates
   * it); a named secret is referenced as it is.
   */
  async agentCredential(tenantId: string, agentId: string, auth: { token?: string; secret?: string }): Promise<string | undefined> {
    if (auth.secret) {
      if (!REF.test(auth.secret)) throw invalidRequest('auth.secret must name a secret (name or name@version)', 'auth.secret');
      return `${AGENT_REF}${auth.secret}`;
    }
    if (!auth.token) return undefined;
    const name = `agent.${agentId}`;
    await this.put(tenantId, name, auth.token);
    return `${AGENT_REF}${name}`;
  }

  /** The bearer token an agent's stored credential stands for: a secret of its tenant, or a value sealed before the store existed. */
  async agentToken(tenantId: string, stored: string): Promise<string> {
    return stored.startsWith(AGENT_REF) ? this.resolve(tenantId, stored.slice(AGENT_REF.length)) : this.#box.open(stored);
  }
}

const info = ({ sealed: _sealed, ...rest }: SecretVersion): SecretInfo => rest;
