// Errors are stored in one shape; rows of the older shapes read as that shape.
import { describe, expect, it } from 'vitest';
import { storedError } from '../../src/domain/stored-error.js';

describe('storedError', () => {
  it('keeps the seed shape as it is', () => {
    const e = { code: 'SCHEMA_VIOLATION', category: 'VALIDATION', message: 'm', retryable: false, details: { pointer: '/x' }, trace_id: 't' };
    expect(storedError(e)).toEqual(e);
  });
  it('reads a run error: extra fields become details, internal_error is INTERNAL', () => {
    expect(storedError({ code: 'internal_error', message: 'lost', reason: 'executor_lost', retryable: true })).toEqual({
      code: 'internal_error',
      category: 'INTERNAL',
      message: 'lost',
      retryable: true,
      details: { reason: 'executor_lost' },
    });
  });
  it('reads a tool call error: retryable follows the code', () => {
    expect(storedError({ code: 'tool_timeout', message: 'late' })).toEqual({ code: 'tool_timeout', category: 'EXECUTION', message: 'late', retryable: true });
    expect(storedError({ code: 'rejected', message: 'no' }).retryable).toBe(false);
  });
});

describe('haltError', () => {
  it('keeps the structured error, its severity and the halt reason; an unknown category is EXECUTION', async () => {
    const { haltError } = await import('../../src/domain/stored-error.js');
    const e = { code: 'STEP_FAILED', message: 'm', severity: 'CRITICAL', retryable: false, suggested_action: 'HALT', metadata: { category: 'NOPE', step_id: 's' } } as never;
    expect(haltError(e, 't', '3 consecutive failures')).toEqual({
      code: 'STEP_FAILED',
      category: 'EXECUTION',
      message: 'm',
      retryable: false,
      details: { step_id: 's', severity: 'CRITICAL', halt_reason: '3 consecutive failures' },
      trace_id: 't',
    });
  });
});
