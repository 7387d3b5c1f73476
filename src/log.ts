import { pino, type Logger } from 'pino';
import type { LogLevel } from './config.js';

export type { Logger };

/** Structured JSON logs. Secrets are redacted wherever they may appear. */
export function createLogger(level: LogLevel, name = 'abc'): Logger {
  return pino({
    name,
    level,
    redact: {
      paths: ['apiKey', 'api_key', 'token', 'authToken', 'auth.token', 'authorization', '*.authorization', 'headers.authorization'],
      censor: '[redacted]',
    },
  });
}
