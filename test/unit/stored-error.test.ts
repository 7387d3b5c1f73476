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
