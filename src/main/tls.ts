// TLS material from the files the configuration names, read once at boot: a
// missing or unreadable file stops the boot with its variable's name.
import { readFileSync } from 'node:fs';
import type { Config } from '../config.js';

export interface TlsFiles {
  cert: Buffer;
  key: Buffer;
  /** Set for mutual TLS: the CA that signed both ends' certificates. */
  ca?: Buffer;
}

export function readTls(config: Pick<Config, 'tlsCertFile' | 'tlsKeyFile' | 'tlsCaFile'>): TlsFiles | undefined {
  if (!config.tlsCertFile || !config.tlsKeyFile) return undefined;
  const read = (variable: string, file: string) => {
    try {
      return readFileSync(file);
    } catch (error) {
      throw new Error(`${variable} ${file}: ${(error as Error).message}`);
    }
  };
  return {
    cert: read('ABC_TLS_CERT_FILE', config.tlsCertFile),
    key: read('ABC_TLS_KEY_FILE', config.tlsKeyFile),
    ...(config.tlsCaFile && { ca: read('ABC_TLS_CA_FILE', config.tlsCaFile) }),
  };
}
