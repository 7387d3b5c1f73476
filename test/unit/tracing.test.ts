import { ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { routeTemplate } from '../../gateway/metrics.js';
import { contextInTrace, contextOf, exportRequested, traceIdOf, traceparentOf } from '../../src/runtime/tracing.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const OTHER = 'a3ce929d0e0e47364bf92f3577b34da6';

describe('exportRequested', () => {
  it('exports only when an OTLP endpoint is set, and not when the SDK or the exporter is off', () => {
    expect(exportRequested({})).toBe(false);
    expect(exportRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(exportRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
    expect(exportRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' })).toBe(false);
    expect(exportRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
  });
});

describe('trace contexts', () => {
  it('reads and writes W3C traceparents, and ignores invalid ones', () => {
    const ctx = contextOf(`00-${TRACE}-00f067aa0ba902b7-01`);
    expect(traceIdOf(ctx)).toBe(TRACE);
    expect(traceparentOf(ctx)).toBe(`00-${TRACE}-00f067aa0ba902b7-01`);
    expect(traceIdOf(contextOf(`00-${'0'.repeat(32)}-00f067aa0ba902b7-01`))).toBeUndefined();
    expect(traceIdOf(contextOf('garbage'))).toBeUndefined();
    expect(contextOf(undefined)).toBe(ROOT_CONTEXT);
  });

  it('continues a trace under its stored traceparent, else a parent in the same trace', () => {
    const stored = `00-${TRACE}-1111111111111111-01`;
    expect(traceparentOf(contextInTrace(TRACE, stored))).toBe(stored);
    // A stored parent of another trace is not used: the work stays in its own trace.
    const fresh = trace.getSpanContext(contextInTrace(TRACE, `00-${OTHER}-1111111111111111-01`))!;
    expect(fresh.traceId).toBe(TRACE);
    expect(fresh.spanId).toMatch(/^[\da-f]{16}$/);
    expect(fresh.spanId).not.toBe('0000000000000000');
    expect(fresh.isRemote).toBe(true);
    expect(traceIdOf(contextInTrace('not-a-trace-id'))).toBeUndefined();
  });
});

describe('routeTemplate', () => {
  it('writes routes as the docs do, without their parameter patterns', () => {
    expect(routeTemplate('/v1/tools/:name(^[^:]+)::invoke')).toBe('/v1/tools/{name}:invoke');
    expect(routeTemplate('/v1/runs/:run_id/events/stream')).toBe('/v1/runs/{run_id}/events/stream');
    expect(routeTemplate('/v1/contracts::submit')).toBe('/v1/contracts:submit');
    expect(routeTemplate('/health')).toBe('/health');
  });
});
