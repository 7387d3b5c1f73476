// The HTTP boundary, once for every route: JSON bodies, query strings and path
// parameters that PostgreSQL or the core could not take are refused here with a
// 400 in ABC's error shape, naming the field; unknown routes, malformed URLs and
// oversized requests answer in that shape too.
import type { FastifyInstance, FastifyReply, FastifyServerOptions } from 'fastify';
import type { ErrorBody } from './errors.js';

/** How deeply JSON may nest, in bodies and frames. */
export const MAX_JSON_DEPTH = 32;
/** How long a query or path value may be. */
export const MAX_PARAM_LENGTH = 2048;

export interface Problem {
  field: string;
  message: string;
}

/**
 * The first value in `value` that no ABC surface accepts: a NUL character or a
 * lone surrogate in a string or key, nesting deeper than MAX_JSON_DEPTH, or a
 * number that is not finite. Undefined when all is well.
 */
export function jsonProblem(value: unknown, field = '', depth = 0): Problem | undefined {
  if (typeof value === 'string') return textProblem(value, field);
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : { field, message: `${field || 'a number'} must be finite` };
  if (value === null || typeof value !== 'object') return undefined;
  if (depth >= MAX_JSON_DEPTH) return { field, message: `JSON may nest at most ${MAX_JSON_DEPTH} levels` };
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const p = jsonProblem(value[i], `${field}[${i}]`, depth + 1);
      if (p) return p;
    }
    return undefined;
  }
  for (const [key, inner] of Object.entries(value)) {
    const path = field ? `${field}.${key}` : key;
    const p = textProblem(key, path) ?? jsonProblem(inner, path, depth + 1);
    if (p) return p;
  }
  return undefined;
}

function textProblem(text: string, field: string): Problem | undefined {
  if (text.includes('\u0000')) return { field, message: `${field || 'a string'} must not contain NUL (\\u0000)` };
  if (!text.isWellFormed()) return { field, message: `${field || 'a string'} is not valid Unicode (a lone surrogate)` };
  return undefined;
}

export const invalid = (p: Problem, code = 'invalid_request'): { error: ErrorBody } => ({
  error: { code, category: 'VALIDATION', message: p.message, retryable: false, ...(p.field && { details: { field: p.field } }) },
});

/** The error body of a request refused before routing, as text (the reply may be a raw socket). */
const shaped = (code: string, message: string): string => JSON.stringify(invalid({ field: '', message }, code));

/** Fastify options that keep malformed requests in ABC's error shape. */
export const boundaryOptions = {
  routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
  // A path that does not decode (`%zz`, a NUL) or a route constraint that fails.
  frameworkErrors: (error, _req, res) => {
    const reply = res as unknown as FastifyReply;
    void reply.code(400).type('application/json').send(shaped('invalid_request', `the request URL is malformed: ${error.message}`));
  },
  // What Node's HTTP parser refuses before Fastify sees a request: an oversized header block (431), a malformed request (400).
  clientErrorHandler: (error, socket) => {
    if (!socket.writable) return socket.destroy();
    const e = error as NodeJS.ErrnoException;
    const status = e.code === 'HPE_HEADER_OVERFLOW' ? 431 : e.code === 'HPE_URI_TOO_LONG' ? 414 : 400;
    const reason = status === 431 ? 'Request Header Fields Too Large' : status === 414 ? 'URI Too Long' : 'Bad Request';
    const body = shaped(status === 400 ? 'invalid_request' : 'request_too_large', `${reason}: the request could not be read`);
    socket.end(`HTTP/1.1 ${status} ${reason}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  },
} satisfies Partial<FastifyServerOptions>;

/** Gives every integer of a schema without a maximum the largest one a protobuf int64 carries exactly. */
function capIntegers(schema: unknown): void {
  if (!schema || typeof schema !== 'object') return;
  const node = schema as Record<string, unknown>;
  const types = Array.isArray(node.type) ? node.type : [node.type];
  if (types.includes('integer') && node.maximum === undefined) node.maximum = Number.MAX_SAFE_INTEGER;
  if (types.includes('integer') && node.minimum === undefined) node.minimum = Number.MIN_SAFE_INTEGER;
  for (const inner of Object.values(node)) {
    if (Array.isArray(inner)) inner.forEach(capIntegers);
    else capIntegers(inner);
  }
}

/** Installs the JSON parser, the query and path checks, the integer caps and the not-found answer. */
export function installBoundary(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    const schema = route.schema as Record<string, unknown> | undefined;
    for (const part of ['body', 'querystring', 'params'] as const) capIntegers(schema?.[part]);
  });

  // An empty JSON body is no body (many clients send content-type: application/json with nothing).
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, text, done) => {
    const raw = String(text);
    if (raw.trim() === '') return done(null, undefined);
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch (error) {
      return done(Object.assign(new Error(`the body is not valid JSON: ${(error as Error).message}`), { statusCode: 400, abcField: 'body' }));
    }
    const problem = jsonProblem(body, 'body');
    if (problem) return done(Object.assign(new Error(problem.message), { statusCode: 400, abcField: problem.field }));
    done(null, body);
  });

  app.addHook('preValidation', async (request, reply) => {
    const problem = jsonProblem(request.params, 'params') ?? jsonProblem(request.query, 'querystring');
    if (problem) return reply.code(400).send(invalid(problem));
  });

  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send({ error: { code: 'not_found', category: 'VALIDATION', message: `no route ${request.method} ${request.url.split('?')[0]!.slice(0, 200)}`, retryable: false } });
  });
}

/** `?platform=true`: the call is about the platform's catalogue or policy instead of the caller's tenant's. */
export const platformQuery = { type: 'object', additionalProperties: false, properties: { platform: { type: 'boolean' } } } as const;
