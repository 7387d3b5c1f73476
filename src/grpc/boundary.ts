// The gRPC boundary, once for every method: bytes that do not decode, and
// decoded requests that PostgreSQL could not take, are INVALID_ARGUMENT naming
// the field, never INTERNAL. The limits are documented in the README (Limits
// and bad input) and on abc.common.v1.Error.
import type { ServiceDefinition } from '@grpc/grpc-js';
import { AbcError, invalidRequest } from '../domain/errors.js';

/** How long an identifier (any `*_id`, `*_key`, `ticket`, `cursor`) may be. */
export const MAX_ID_LENGTH = 256;
/** How deeply a request may nest (Struct values included). */
export const MAX_DEPTH = 64;

const ID_FIELD = /(Id|Key|^ticket|^cursor|^nextTicket)$/;

/** What a request that did not decode turns into, so the handler's wrapper can refuse it. */
export class Undecodable {
  constructor(readonly reason: string) {}
}

/** A copy of `definition` whose request decoders never throw: a bad message becomes `Undecodable`. */
export function tolerantDefinition<D extends ServiceDefinition>(definition: D): D {
  const out: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(definition)) {
    const decode = method.requestDeserialize;
    out[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        try {
          return decode(bytes);
        } catch (error) {
          return new Undecodable((error as Error).message);
        }
      },
    };
  }
  return out as D;
}

/** Throws INVALID_ARGUMENT for a request that did not decode or that holds a value no store accepts. */
export function checkRequest(request: unknown): void {
  if (request instanceof Undecodable) throw invalidRequest(`the request is not a valid protobuf message: ${request.reason.slice(0, 200)}`);
  const problem = findProblem(request, '', 0);
  if (problem) throw invalidRequest(problem.message, problem.field);
}

const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

function findProblem(value: unknown, field: string, depth: number): { field: string; message: string } | undefined {
  if (typeof value === 'string') {
    if (value.includes('\u0000')) return { field, message: `${field || 'a string'} must not contain NUL (\\u0000)` };
    if (!value.isWellFormed()) return { field, message: `${field || 'a string'} is not valid Unicode (a lone surrogate)` };
    return undefined;
  }
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return { field, message: `${field} must be a finite number` };
    if (Number.isInteger(value) && !Number.isSafeInteger(value)) return { field, message: `${field} is out of range (at most 2^53 - 1)` };
    return undefined;
  }
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return undefined;
  if (depth >= MAX_DEPTH) return { field, message: `the request may nest at most ${MAX_DEPTH} levels` };
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const p = findProblem(value[i], `${field}[${i}]`, depth + 1);
      if (p) return p;
    }
    return undefined;
  }
  for (const [key, inner] of Object.entries(value)) {
    const path = field ? `${field}.${snake(key)}` : snake(key);
    if (typeof inner === 'string' && ID_FIELD.test(key) && inner.length > MAX_ID_LENGTH) {
      return { field: path, message: `${path} may be at most ${MAX_ID_LENGTH} characters` };
    }
    if (key.includes('\u0000')) return { field: path, message: `${path}: a key must not contain NUL (\\u0000)` };
    const p = findProblem(inner, path, depth + 1);
    if (p) return p;
  }
  return undefined;
}

/** Caps what an error echoes back (a message or a detail can quote the caller's input). */
export function boundedError(error: AbcError): AbcError {
  const p = error.payload;
  const tooLong = p.message.length > 1024 || (p.details && JSON.stringify(p.details).length > 4096);
  if (!tooLong) return error;
  return new AbcError(error.status, { ...p, message: p.message.slice(0, 1024), details: p.details && JSON.stringify(p.details).length > 4096 ? { truncated: true } : p.details }, { cause: error });
}
