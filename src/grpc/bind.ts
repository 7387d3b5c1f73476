// Binds plain async handlers to a grpc-js service definition, in one place:
// authentication, cancellation as an AbortSignal, and error mapping.
// Only an AbcError reaches a client; anything else becomes `internal_error`.
import { Metadata as MetadataClass, status } from '@grpc/grpc-js';
import { performance } from 'node:perf_hooks';
import { metrics } from '../runtime/metrics.js';
import type {
  Metadata,
  MethodDefinition,
  ServerDuplexStream,
  ServerUnaryCall,
  ServerWritableStream,
  ServiceDefinition,
  UntypedServiceImplementation,
  sendUnaryData,
} from '@grpc/grpc-js';
import { AbcError } from '../domain/errors.js';
import type { Principal } from '../access/principal.js';
import type { Logger } from '../runtime/log.js';
import { context as otel, contextOf, failSpan, SpanKind, startSpan, traceIdOf, type Context } from '../runtime/tracing.js';
import { boundedError, checkRequest } from './boundary.js';
import { toServiceError } from './errors.js';

export interface CallContext {
  principal: Principal | null;
  metadata: Metadata;
  /** Aborted when the client cancels or disconnects. */
  signal: AbortSignal;
  log: Logger;
  /** Streams: sends the response headers now, so a client knows the call was accepted before the first message. */
  accept(): void;
}

type Unary<Req, Res> = (request: Req, ctx: CallContext) => Promise<Res>;
type ServerStream<Req, Res> = (request: Req, ctx: CallContext) => AsyncIterable<Res>;
type Bidi<Req, Res> = (requests: AsyncIterable<Req>, ctx: CallContext) => AsyncIterable<Res>;

/** The handler type for each method of a ts-proto grpc-js service definition. */
export type ServiceHandlers<D> = {
  [K in keyof D]: D[K] extends MethodDefinition<infer Req, infer Res>
    ? D[K]['requestStream'] extends true
      ? Bidi<Req, Res>
      : D[K]['responseStream'] extends true
        ? ServerStream<Req, Res>
        : Unary<Req, Res>
    : never;
};

export interface BindOptions {
  log: Logger;
  /** Resolves the caller; throw AbcError UNAUTHENTICATED to refuse. Null means anonymous is allowed. */
  authenticate: (metadata: Metadata, method: string) => Promise<Principal | null>;
  /** Aborted when the server shuts down: open streams end. */
  shutdown: AbortSignal;
}

export function bindService<D extends ServiceDefinition>(
  definition: D,
  handlers: ServiceHandlers<D>,
  opts: BindOptions,
): UntypedServiceImplementation {
  const impl: UntypedServiceImplementation = {};
  // Calls in flight, so shutdown can end them without a combined signal per call.
  const active = new Set<AbortController>();
  opts.shutdown.addEventListener('abort', () => active.forEach((c) => c.abort()), { once: true });
  for (const [name, method] of Object.entries(definition) as [keyof D & string, MethodDefinition<unknown, unknown>][]) {
    const handler = handlers[name] as unknown as (...args: unknown[]) => unknown;
    const log = opts.log.child({ rpc: method.path });
    const context = async (call: { metadata: Metadata; on(event: 'cancelled', fn: () => void): unknown; sendMetadata?(m: Metadata): void }, controller: AbortController) => {
      // grpc-js also reports a finished call's stream closing as 'cancelled'; only a live call aborts.
      call.on('cancelled', () => active.has(controller) && controller.abort());
      if (opts.shutdown.aborted) controller.abort();
      const principal = await opts.authenticate(call.metadata, method.path);
      const requestId = call.metadata.get('x-request-id')[0];
      let accepted = false;
      const accept = () => {
        if (accepted || !call.sendMetadata) return;
        accepted = true;
        call.sendMetadata(new MetadataClass());
      };
      // The call's lines name its request; its trace and span come with the active context (see createLogger).
      return { principal, metadata: call.metadata, signal: controller.signal, log: requestId ? log.child({ reqId: String(requestId) }) : log, accept } satisfies CallContext;
    };
    const track = (metadata: Metadata) => {
      const controller = new AbortController();
      active.add(controller);
      const started = performance.now();
      const { span, context: spanContext } = startSpan(method.path.slice(1), {
        kind: SpanKind.SERVER,
        attributes: { 'rpc.system.name': 'grpc', 'rpc.method': method.path.slice(1) },
      }, callerContext(metadata));
      return {
        controller,
        /** The call's trace context: its server span, under the caller's `traceparent`. */
        spanContext,
        /** Ends the call: counted by its status code, timed, its span ended. */
        release: (code: string, error?: unknown) => {
          active.delete(controller);
          metrics.rpcRequests.inc({ method: method.path, code });
          metrics.rpcDuration.observe({ method: method.path }, (performance.now() - started) / 1000);
          span.setAttribute('rpc.response.status_code', code);
          if (error && SERVER_FAULTS.has(code)) failSpan(span, error);
          span.end();
        },
      };
    };
    const fail = (error: unknown) => {
      const abc = withTrace(boundedError(AbcError.from(error)));
      if (abc.status === 'INTERNAL' || abc.status === 'UNKNOWN') log.error({ err: error }, 'rpc failed');
      return toServiceError(abc);
    };

    if (!method.requestStream && !method.responseStream) {
      impl[name] = (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
        const { controller, release, spanContext } = track(call.metadata);
        otel.with(spanContext, () =>
          context(call, controller)
            .then((ctx) => {
              checkRequest(call.request);
              return (handler as Unary<unknown, unknown>)(call.request, ctx);
            })
            .then(
              (res) => {
                callback(null, res);
                release('OK');
              },
              (error) => {
                const failure = fail(error);
                callback(failure);
                release(codeName(failure.code), error);
              },
            ),
        );
      };
    } else if (!method.requestStream) {
      impl[name] = (call: ServerWritableStream<unknown, unknown>) => {
        pump(call, async (ctx) => {
          checkRequest(call.request);
          return (handler as ServerStream<unknown, unknown>)(call.request, ctx);
        });
      };
    } else {
      impl[name] = (call: ServerDuplexStream<unknown, unknown>) => {
        // A stream's own iterator destroys the whole call when the client's side ends, and a
        // destroyed call can send no status: the handler reads the requests with one that does not.
        pump(call, async (ctx) => (handler as Bidi<unknown, unknown>)(call.iterator({ destroyOnReturn: false }), ctx));
      };
    }

    function pump(
      call: ServerWritableStream<unknown, unknown> | ServerDuplexStream<unknown, unknown>,
      start: (ctx: CallContext) => Promise<AsyncIterable<unknown>>,
    ): void {
      const { controller, release, spanContext } = track(call.metadata);
      void otel.with(spanContext, () => stream(call, start, controller, release));
    }

    async function stream(
      call: ServerWritableStream<unknown, unknown> | ServerDuplexStream<unknown, unknown>,
      start: (ctx: CallContext) => Promise<AsyncIterable<unknown>>,
      controller: AbortController,
      release: (code: string, error?: unknown) => void,
    ) {
      let code = 'OK';
      let failed: unknown;
      try {
        const ctx = await context(call, controller);
        for await (const message of await start(ctx)) {
          if (ctx.signal.aborted) break;
          if (!call.write(message)) await waitForDrain(call, ctx.signal);
        }
        if (call.cancelled) code = 'CANCELLED';
        else call.end();
      } catch (error) {
        if (call.cancelled) {
          code = 'CANCELLED';
          return;
        }
        const failure = fail(error);
        code = codeName(failure.code);
        failed = error;
        call.emit('error', failure);
      } finally {
        release(code, failed);
      }
    }
  }
  return impl;
}

/** Codes that are the server's fault: these mark a call's span as an error. */
const SERVER_FAULTS = new Set(['UNKNOWN', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS', 'DEADLINE_EXCEEDED', 'UNIMPLEMENTED']);

/** The caller's trace: its `traceparent`, or a new trace. */
function callerContext(metadata: Metadata): Context {
  return contextOf(String(metadata.get('traceparent')[0] ?? '') || undefined);
}

const codeName = (code: number | undefined) => (code === undefined ? 'UNKNOWN' : (status[code] ?? String(code)));

function waitForDrain(stream: NodeJS.EventEmitter, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    stream.once('drain', done);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** An error that names no trace gets the call's. */
function withTrace(error: AbcError): AbcError {
  const traceId = traceIdOf();
  if (error.payload.traceId || !traceId) return error;
  return new AbcError(error.status, { ...error.payload, traceId }, { cause: error.cause ?? error });
}
