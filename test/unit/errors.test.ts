// Anything thrown becomes an AbcError: a database that is away is retryable
// UNAVAILABLE, a value PostgreSQL refuses is the caller's INVALID_ARGUMENT.
import { describe, expect, it } from 'vitest';
import { AbcError, isDatabaseUnavailable, pageLimit } from '../../src/domain/errors.js';

const pgError = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('AbcError.from', () => {
  it.each([
    ['ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'],
    ['57P01', 'terminating connection due to administrator command'],
    ['57P03', 'the database system is starting up'],
    ['08006', 'connection failure'],
    ['53300', 'too many connections'],
  ])('maps %s to UNAVAILABLE database_unavailable', (code, message) => {
    const e = AbcError.from(pgError(code, message));
    expect(e.status).toBe('UNAVAILABLE');
    expect(e.payload).toMatchObject({ code: 'database_unavailable', retryable: true, retryAfterSeconds: 1 });
  });

  it('finds the cause of a wrapped driver error, and a closed connection by its message', () => {
    expect(isDatabaseUnavailable(new Error('query failed', { cause: pgError('ECONNRESET') }))).toBe(true);
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('timeout exceeded when trying to connect'))).toBe(true);
  });

  it.each(['22021', '22003', '22P05', '08P01', '54001'])('maps the data error %s to INVALID_ARGUMENT', (code) => {
    const e = AbcError.from(pgError(code));
    expect(e.status).toBe('INVALID_ARGUMENT');
    expect(e.payload.code).toBe('invalid_request');
    expect(isDatabaseUnavailable(pgError(code))).toBe(false);
  });

  it('keeps anything else INTERNAL', () => {
    expect(AbcError.from(new TypeError('x is undefined')).status).toBe('INTERNAL');
    expect(AbcError.from(pgError('23505')).status).toBe('INTERNAL');
  });
});

describe('a transaction conflict', () => {
  it.each(['40P01', '40001'])('(%s) is ABORTED and retryable, never INTERNAL', (code) => {
    const e = AbcError.from(pgError(code));
    expect(e.status).toBe('ABORTED');
    expect(e.payload).toMatchObject({ code: 'conflict', retryable: true });
  });
});

describe('pageLimit', () => {
  it('takes the fallback for 0, keeps a limit in range, and refuses one outside it as the limit field', () => {
    expect(pageLimit(0, 50, 500)).toBe(50);
    expect(pageLimit(500, 50, 500)).toBe(500);
    for (const limit of [-1, 501]) {
      const thrown = (() => {
        try {
          pageLimit(limit, 50, 500);
        } catch (error) {
          return error as AbcError;
        }
      })();
      expect(thrown?.status).toBe('INVALID_ARGUMENT');
      expect(thrown?.payload).toMatchObject({ code: 'invalid_request', message: 'limit must be 1-500', details: { field: 'limit' } });
    }
  });
});
