// The active policy: loaded from ABC_POLICY_FILE, reloaded when the file changes.
// A file that fails its schema is refused with a clear error; the old policy stays.
import { readFile } from 'node:fs/promises';
import { unwatchFile, watchFile } from 'node:fs';
import { Ajv } from 'ajv';
import { duplicateRuleIds, POLICY_SCHEMA, type PolicyDocument } from '../domain/policy.js';
import type { Logger } from '../runtime/log.js';

/** With no policy file every call is allowed. */
export const ALLOW_ALL: PolicyDocument = { version: 1, rules: [], default: 'allow' };

const validate = new Ajv({ strict: true, allErrors: false }).compile(POLICY_SCHEMA);

/** Parses and checks a policy document; the error names the place that is wrong. */
export function parsePolicy(text: string): { ok: true; policy: PolicyDocument } | { ok: false; error: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { ok: false, error: `not valid JSON: ${(error as Error).message}` };
  }
  if (!validate(json)) {
    const e = validate.errors![0]!;
    return { ok: false, error: `${e.instancePath || '(document)'} ${e.message}` };
  }
  const policy = json as PolicyDocument;
  const duplicates = duplicateRuleIds(policy);
  if (duplicates.length) return { ok: false, error: `duplicate rule ids: ${duplicates.join(', ')}` };
  for (const rule of policy.rules) {
    for (const [path, cond] of Object.entries(rule.when?.args ?? {})) {
      if (cond.matches === undefined) continue;
      try {
        new RegExp(cond.matches);
      } catch {
        return { ok: false, error: `rule ${rule.id}: args.${path}.matches is not a valid regular expression` };
      }
    }
  }
  return { ok: true, policy };
}

export class PolicyStore {
  #policy: PolicyDocument;
  readonly #file: string | undefined;
  readonly #log: Logger;

  private constructor(policy: PolicyDocument, file: string | undefined, log: Logger) {
    this.#policy = policy;
    this.#file = file;
    this.#log = log;
  }

  /** Loads the policy file (a bad one stops the boot) and watches it for changes. */
  static async open(file: string | undefined, log: Logger, pollMs = 500): Promise<PolicyStore> {
    const store = new PolicyStore(ALLOW_ALL, file, log.child({ component: 'policy' }));
    if (!file) return store;
    const result = await store.reload();
    if (!result.ok) throw new Error(`ABC_POLICY_FILE ${file}: ${result.error}`);
    watchFile(file, { interval: pollMs, persistent: false }, () => void store.reload());
    return store;
  }

  current(): PolicyDocument {
    return this.#policy;
  }

  /** Re-reads the file. On failure the active policy is kept and the error returned. */
  async reload(): Promise<{ ok: true } | { ok: false; error: string }> {
    if (!this.#file) return { ok: true };
    let text: string;
    try {
      text = await readFile(this.#file, 'utf8');
    } catch (error) {
      return this.#refuse(`cannot read the file: ${(error as Error).message}`);
    }
    const parsed = parsePolicy(text);
    if (!parsed.ok) return this.#refuse(parsed.error);
    this.#policy = parsed.policy;
    this.#log.info({ file: this.#file, rules: parsed.policy.rules.length }, 'policy loaded');
    return { ok: true };
  }

  #refuse(error: string): { ok: false; error: string } {
    this.#log.error({ file: this.#file, error }, 'policy refused; the previous policy stays active');
    return { ok: false, error };
  }

  close(): void {
    if (this.#file) unwatchFile(this.#file);
  }
}
