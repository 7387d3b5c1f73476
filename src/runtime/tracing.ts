// OpenTelemetry tracing. Every thread installs it once: a context manager, the
// W3C propagator and a tracer provider. Spans always get real ids, so trace
// ids flow the same way whether or not anything is exported; spans are sent
// over OTLP only when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set (the
// standard OTEL_* variables configure the rest).
import { createRequire } from 'node:module';
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Attributes, Context, Link, Span, SpanOptions, TextMapGetter } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { suppressTracing, W3CTraceContextPropagator } from '@opentelemetry/core';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider,
  type Sampler, type SpanExporter,
} from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { Logger } from './log.js';
import { randomHex } from './new-id.js';

export { context, trace, SpanKind, type Span, type Context };

const VERSION = '0.1.0';

/** The standard variables ABC's tracing reads (the OTLP exporters read the rest of OTEL_EXPORTER_OTLP_*). */
export const OTEL_VARIABLES = [
  'OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_EXPORTER_OTLP_PROTOCOL', 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
  'OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_TIMEOUT', 'OTEL_SERVICE_NAME', 'OTEL_RESOURCE_ATTRIBUTES', 'OTEL_SDK_DISABLED',
  'OTEL_TRACES_EXPORTER', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG', 'OTEL_BSP_SCHEDULE_DELAY', 'OTEL_BSP_EXPORT_TIMEOUT',
  'OTEL_BSP_MAX_QUEUE_SIZE', 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE',
] as const;
const w3c = new W3CTraceContextPropagator();
let installed: { provider: TracerProvider; exporting: boolean } | undefined;

/** Whether the standard variables ask for spans to be exported. */
export function exportRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT);
}

/**
 * Installs tracing in this thread, once; later calls return the first
 * installation. `service` names the process (`OTEL_SERVICE_NAME` wins).
 */
export async function startTracing(service: string, log: Logger, env: NodeJS.ProcessEnv = process.env): Promise<{ exporting: boolean; shutdown(): Promise<void> }> {
  if (!installed) {
    const exporting = exportRequested(env);
    const exporter = exporting ? await exporterFor(env, log) : undefined;
    const detected = await detectResources({ detectors: [envDetector] });
    const resource = resourceFromAttributes({ [ATTR_SERVICE_NAME]: service, [ATTR_SERVICE_VERSION]: VERSION }).merge(detected);
    const provider = new TracerProvider({
      resource,
      // Exporting nothing, ABC records only what its caller asked to sample, so that decision
      // still reaches agents, the router and webhooks; a trace it starts itself is unsampled.
      sampler: exporter ? samplerFrom(env, log) : new ParentBasedSampler({ root: new AlwaysOffSampler() }),
      spanProcessors: exporter ? [new BatchSpanProcessor({ exporter, ...batchOptions(env) })] : [],
    });
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(w3c);
    trace.setGlobalTracerProvider(provider);
    if (exporter) instrumentPostgres();
    installed = { provider, exporting: Boolean(exporter) };
    if (exporter) log.info({ service, endpoint: env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT }, 'exporting traces over OTLP');
  }
  const provider = installed.provider;
  return { exporting: installed.exporting, shutdown: () => provider.shutdown().catch(() => {}) };
}

/** Sends what is buffered now (tests, and before a process exits). */
export async function flushTraces(): Promise<void> {
  await installed?.provider.forceFlush().catch(() => {});
}

async function exporterFor(env: NodeJS.ProcessEnv, log: Logger): Promise<SpanExporter> {
  const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf';
  if (protocol === 'grpc') return new (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter();
  if (protocol === 'http/json') return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
  if (protocol !== 'http/protobuf') log.warn({ protocol }, 'unknown OTLP protocol; using http/protobuf');
  return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter();
}

/** OTEL_TRACES_SAMPLER and its argument; parent-based always-on by default. */
function samplerFrom(env: NodeJS.ProcessEnv, log: Logger): Sampler {
  const ratio = Number(env.OTEL_TRACES_SAMPLER_ARG ?? '1');
  const bounded = Number.isFinite(ratio) && ratio >= 0 && ratio <= 1 ? ratio : 1;
  switch (env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on') {
    case 'always_on': return new AlwaysOnSampler();
    case 'always_off': return new AlwaysOffSampler();
    case 'traceidratio': return new TraceIdRatioBasedSampler(bounded);
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(bounded) });
    case 'parentbased_always_on': return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    default:
      log.warn({ sampler: env.OTEL_TRACES_SAMPLER }, 'unknown OTEL_TRACES_SAMPLER; sampling every trace');
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

function batchOptions(env: NodeJS.ProcessEnv) {
  const options: Record<string, number> = {};
  for (const [option, name] of [
    ['scheduledDelayMillis', 'OTEL_BSP_SCHEDULE_DELAY'],
    ['exportTimeoutMillis', 'OTEL_BSP_EXPORT_TIMEOUT'],
    ['maxQueueSize', 'OTEL_BSP_MAX_QUEUE_SIZE'],
    ['maxExportBatchSize', 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE'],
  ] as const) {
    const value = Number(env[name]);
    if (env[name] && Number.isFinite(value) && value > 0) options[option] = value;
  }
  return options;
}

/**
 * Spans for PostgreSQL queries. `pg` is CommonJS: the instrumentation patches
 * a copy's client prototype when that copy is required, and every importer of
 * the copy shares it. The ORM may bring its own copy: both are required here.
 */
function instrumentPostgres(): void {
  registerInstrumentations({ instrumentations: [new PgInstrumentation({ requireParentSpan: true })] });
  for (const from of [import.meta.url, import.meta.resolve('@mikro-orm/postgresql')]) createRequire(from)('pg');
}

function tracer() {
  return trace.getTracer('abc', VERSION);
}

/** A context whose parent is the W3C `traceparent` given; the root context when it is absent or invalid. */
export function contextOf(traceparent: string | undefined, base: Context = ROOT_CONTEXT): Context {
  return traceparent ? w3c.extract(base, { traceparent }, RECORD_GETTER) : base;
}

/** The W3C `traceparent` of a context's span, for an outgoing call. */
export function traceparentOf(ctx: Context = context.active()): string | undefined {
  const carrier: Record<string, string> = {};
  w3c.inject(ctx, carrier, { set: (c, k, v) => void (c[k] = v) });
  return carrier.traceparent;
}

/**
 * The context for work on behalf of a run, call or ticket whose trace is
 * `traceId`: under the span that started it (its stored `traceparent`), else
 * the active one when it is in that trace, else a remote parent in the trace,
 * so what is done later (on another core, after an approval, from the queue)
 * keeps the trace's id.
 */
export function contextInTrace(traceId: string, traceparent?: string | null): Context {
  const started = traceparent ? contextOf(traceparent) : undefined;
  if (started && trace.getSpanContext(started)?.traceId === traceId) return started;
  const active = context.active();
  if (trace.getSpanContext(active)?.traceId === traceId) return active;
  if (!/^[\da-f]{32}$/.test(traceId) || /^0+$/.test(traceId)) return active;
  return trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: randomSpanId(), traceFlags: 1, isRemote: true });
}

/** The traceparent to store for work that continues later: the active span's, when it is in `traceId`. */
export function traceparentIn(traceId: string): string | undefined {
  return traceIdOf() === traceId ? traceparentOf() : undefined;
}

/** The trace id of a context's span, when it has a valid one. */
export function traceIdOf(ctx: Context = context.active()): string | undefined {
  const sc = trace.getSpanContext(ctx);
  return sc && trace.isSpanContextValid(sc) ? sc.traceId : undefined;
}

/**
 * Runs `fn` in a new span under `parent` (the active context by default).
 * A throw marks the span as an error; the span ends when `fn` settles.
 */
export async function inSpan<T>(name: string, options: SpanOptions & { parent?: Context }, fn: (span: Span) => Promise<T>): Promise<T> {
  const span = tracer().startSpan(name, options, options.parent ?? context.active());
  try {
    return await context.with(trace.setSpan(options.parent ?? context.active(), span), () => fn(span));
  } catch (error) {
    failSpan(span, error);
    throw error;
  } finally {
    span.end();
  }
}

/** Runs `fn` with tracing suppressed: no span is made for what it does (polling reads). */
export function untraced<T>(fn: () => Promise<T>): Promise<T> {
  return context.with(suppressTracing(context.active()), fn);
}

/** Starts a span that outlives one call (a run, a stream); the caller ends it. */
export function startSpan(name: string, options: SpanOptions & { links?: Link[] }, parent: Context = context.active()): { span: Span; context: Context } {
  const span = tracer().startSpan(name, options, parent);
  return { span, context: trace.setSpan(parent, span) };
}

/** Marks a span failed with the error's message. */
export function failSpan(span: Span, error: unknown, attributes: Attributes = {}): void {
  const message = error instanceof Error ? error.message : String(error);
  span.recordException(error instanceof Error ? error : message);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  span.setAttributes({ 'error.type': errorType(error), ...attributes });
}

function errorType(error: unknown): string {
  const code = (error as { payload?: { code?: unknown } } | null)?.payload?.code;
  if (typeof code === 'string') return code;
  return error instanceof Error ? error.name : 'error';
}

function randomSpanId(): string {
  let id = '';
  while (!/[^0]/.test(id)) id = randomHex(8);
  return id;
}

const RECORD_GETTER: TextMapGetter<Record<string, string>> = {
  get: (carrier, key) => carrier[key],
  keys: (carrier) => Object.keys(carrier),
};
