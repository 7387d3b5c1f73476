import { context, isSpanContextValid, trace } from '@opentelemetry/api';
import { pino, type DestinationStream, type Logger } from 'pino';
import sonicBoom from 'sonic-boom';
import type { LogLevel } from '../config.js';

export type { Logger };

let stdout: DestinationStream | undefined;

/**
 * Stdout, written in batches off the request path: a write per 3 KiB or per 250 ms,
 * not one per line. Each write is whole lines and at most PIPE_BUF (4 KiB), so lines
 * of the gateway thread and of the core never interleave on a pipe. What is left is
 * flushed when the thread exits. A reader that went away (EPIPE) ends the logs, not
 * the process: with pino's own sonic-boom 4, that last flush retried the write
 * forever, and the process, deaf to signals, never exited.
 */
function stdoutDestination(): DestinationStream {
  if (stdout) return stdout;
  let gone = false;
  const boom = new sonicBoom.SonicBoom({ fd: 1, sync: false, minLength: 3072, maxWrite: 4096, periodicFlush: 250 });
  boom.on('error', (error: NodeJS.ErrnoException) => {
    if (gone) return;
    gone = true;
    process.stderr.write(`abc: stdout failed (${error.code ?? error.message}); logging stops\n`);
  });
  process.on('exit', () => {
    try {
      if (!gone) boom.flushSync();
    } catch {
      // The reader is gone: the last lines are lost with it.
    }
  });
  stdout = { write: (line: string) => void (gone || boom.write(line)) };
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
