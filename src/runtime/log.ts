import { context, isSpanContextValid, trace } from '@opentelemetry/api';
import { pino, type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from '../config.js';

export type { Logger };

let stdout: DestinationStream | undefined;

/**
 * Stdout, written in batches off the request path: a write per 3 KiB or per 250 ms,
 * not one per line. pino flushes what is left when the process exits. Each write is
 * whole lines and at most PIPE_BUF (4 KiB), so lines of the gateway thread and of
 * the core never interleave on a pipe.
 */
function stdoutDestination(): DestinationStream {
  stdout ??= pino.destination({ dest: 1, sync: false, minLength: 3072, maxWrite: 4096, periodicFlush: 250 });
  return stdout;
}

/**
 * Structured JSON logs. Secrets are redacted wherever they may appear. A line
 * written inside a span (a request, a run, a contract's pass) names its trace
 * and span, so lines and traces join up.
 */
export function createLogger(level: LogLevel, name = 'abc'): Logger {
  return pino(
    {
      name,
      level,
      mixin: traceFields,
      redact: {
        paths: ['apiKey', 'api_key', 'token', 'authToken', 'auth.token', 'authorization', '*.authorization', 'headers.authorization'],
        censor: '[redacted]',
      },
    },
    stdoutDestination(),
  );
}

function traceFields(): Record<string, string> {
  const span = trace.getSpanContext(context.active());
  return span && isSpanContextValid(span) ? { trace_id: span.traceId, span_id: span.spanId } : {};
}
