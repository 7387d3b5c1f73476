// Secrets at rest (agents' bearer tokens): AES-256-GCM under a key from
// ABC_SECRET_KEY, or one minted into $ABC_DATA_DIR/secret-key on first use.
import { parseSecretKey } from '../domain/secret-key.js';
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AbcError } from '../domain/errors.js';

const PREFIX = 'v1:';

export class SecretBox {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('a secret key is 32 bytes');
    this.#key = key;
  }

  /** A box with a random key that lives as long as the process (tests, throwaway cores). */
  static ephemeral(): SecretBox {
    return new SecretBox(randomBytes(32));
  }

  /** HMAC-SHA256 of `data` under a key derived from this box's for `purpose`, base64url. */
  mac(purpose: string, data: string): string {
    const key = createHmac('sha256', this.#key).update(`abc ${purpose}`).digest();
    return createHmac('sha256', key).update(data).digest('base64url');
  }

  /** `v1:` and base64url(iv ‖ tag ‖ ciphertext). */
  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return PREFIX + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url');
  }

  /** The plain secret. A value stored before encryption existed is returned as it is. */
  open(stored: string): string {
    if (!stored.startsWith(PREFIX)) return stored;
    const raw = Buffer.from(stored.slice(PREFIX.length), 'base64url');
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, raw.subarray(0, 12));
      decipher.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    } catch (error) {
      throw new AbcError('FAILED_PRECONDITION', { code: 'secret_unreadable', category: 'INTERNAL', message: 'a stored secret cannot be decrypted: ABC_SECRET_KEY differs from the key it was sealed with', retryable: false }, { cause: error });
    }
  }
}

/** The key in $dataDir/secret-key, minted (mode 0600) when missing. */
export async function loadOrMintSecretKey(dataDir: string): Promise<{ key: Buffer; minted: boolean }> {
  const file = path.join(dataDir, 'secret-key');
  if (existsSync(file)) {
    const parsed = parseSecretKey((await readFile(file, 'utf8')).trim());
    if ('error' in parsed) throw new Error(`${file}: ${parsed.error}`);
    return { key: parsed.value, minted: false };
  }
  const key = randomBytes(32);
  await mkdir(dataDir, { recursive: true });
  await writeFile(file, `${key.toString('hex')}\n`, { mode: 0o600 });
  return { key, minted: true };
}

export { parseSecretKey };
