// The tool kinds ABC ships (builtin, http, client) and the registry the planes
// ask about any kind. A new kind is a ToolKindAdapter added where the core is
// composed (main/core.ts); the planes do not change.
import { invalidRequest } from '../domain/errors.js';
import type { ToolRow } from '../domain/tool.js';
import type { ToolKindAdapter, ToolInvocation } from '../ports/tool-kind.js';
import { BUILTIN_TOOLS } from './builtin-tools.js';
import { ToolFailure } from './tool-failure.js';

export const builtinKind: ToolKindAdapter = {
  kind: 'builtin',
  clientSide: false,
  validate(tool) {
    if (!BUILTIN_TOOLS.some((b) => b.name === tool.name)) throw invalidRequest(`there is no built-in tool ${tool.name}`, 'name');
  },
  async run({ tool, args, signal }) {
    const builtin = BUILTIN_TOOLS.find((b) => b.name === tool.name);
    if (!builtin) throw new ToolFailure('tool_failed', `no built-in tool ${tool.name}`);
    return Promise.race([
      builtin.execute(args, signal),
      new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true })),
    ]);
  },
};

/**
 * An HTTP webhook: POST {endpoint} with `{tool, args, tool_call_id, run_id}`
 * (and `idempotency-key: tool_call_id`). A 2xx JSON body is the result; any
 * other status fails the call, with the body's `{error: {...}}` kept as the
 * tool's own error (code, category, message, retryable, suggested_action).
 */
export const httpKind: ToolKindAdapter = {
  kind: 'http',
  clientSide: false,
  validate(tool) {
    try {
      const url = new URL(tool.endpoint ?? '');
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error();
    } catch {
      throw invalidRequest('an http tool needs an absolute http(s) endpoint', 'endpoint');
    }
    authOf(tool);
  },
  async run({ tool, args, toolCallId, runId, signal, secret, traceparent }: ToolInvocation) {
    const auth = authOf(tool);
    const value = auth && (await secret(auth.secret));
    const credential = auth && value ? { [auth.header]: auth.type === 'bearer' ? `Bearer ${value}` : value } : {};
    const res = await fetch(tool.endpoint!, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': toolCallId, 'x-tool-call-id': toolCallId, 'x-run-id': runId, ...(traceparent && { traceparent }), ...credential },
      body: JSON.stringify({ tool: tool.name, args, tool_call_id: toolCallId, run_id: runId }),
      signal,
    });
    // A webhook that echoes its credential does not get it stored in a result, an error or an event.
    const raw = await res.text();
    const text = value ? raw.replaceAll(value, '[secret]') : raw;
    if (!res.ok) throw new ToolFailure('tool_failed', `${tool.name} answered HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ''}`, { detail: errorObject(text) });
    try {
      return text ? JSON.parse(text) : null;
    } catch {
      throw new ToolFailure('invalid_output', `${tool.name} answered a body that is not JSON`);
    }
  },
};

/**
 * How an http tool authenticates, from its definition's `metadata.auth`:
 * `{"type": "bearer", "secret": "crm"}` sends `authorization: Bearer <value>`;
 * `{"type": "header", "header": "x-api-key", "secret": "crm@2"}` sends the value in that header.
 */
function authOf(tool: ToolRow): { type: 'bearer' | 'header'; header: string; secret: string } | undefined {
  const auth = tool.metadata?.auth as { type?: unknown; header?: unknown; secret?: unknown } | undefined;
  if (auth === undefined) return undefined;
  const bad = (message: string) => invalidRequest(`metadata.auth: ${message}`, 'metadata.auth');
  if (typeof auth !== 'object' || auth === null) throw bad('must be an object');
  if (typeof auth.secret !== 'string' || !/^[A-Za-z0-9._-]{1,128}(@\d{1,9})?$/.test(auth.secret)) throw bad('secret must name a secret (name or name@version)');
  if (auth.type === 'bearer') return { type: 'bearer', header: 'authorization', secret: auth.secret };
  if (auth.type === 'header' && typeof auth.header === 'string' && /^[A-Za-z0-9-]{1,64}$/.test(auth.header)) return { type: 'header', header: auth.header.toLowerCase(), secret: auth.secret };
  throw bad('type must be bearer, or header with a header name');
}

/** Runs on the client that started the run: ABC sends tool_request over IM and waits for tool_result. */
export const clientKind: ToolKindAdapter = { kind: 'client', clientSide: true, validate() {} };

export const DEFAULT_TOOL_KINDS: readonly ToolKindAdapter[] = [builtinKind, httpKind, clientKind];

export class ToolKinds {
  readonly #kinds: Map<string, ToolKindAdapter>;

  constructor(adapters: readonly ToolKindAdapter[] = DEFAULT_TOOL_KINDS) {
    this.#kinds = new Map(adapters.map((a) => [a.kind, a]));
    for (const a of adapters) if (!a.clientSide && !a.run) throw new Error(`tool kind ${a.kind} runs on the server but has no run()`);
  }

  /** The adapter of `kind`; an unknown kind is the caller's mistake. */
  get(kind: string): ToolKindAdapter {
    const adapter = this.#kinds.get(kind);
    if (!adapter) throw invalidRequest(`kind must be one of ${this.names().join(', ')}`, 'kind');
    return adapter;
  }

  names(): string[] {
    return [...this.#kinds.keys()];
  }

  clientSide(kind: string): boolean {
    return this.#kinds.get(kind)?.clientSide ?? false;
  }

  /** Kinds that run on clients, for SQL filters. */
  clientKinds(): string[] {
    return [...this.#kinds.values()].filter((a) => a.clientSide).map((a) => a.kind);
  }

  validate(tool: ToolRow): void {
    this.get(tool.kind).validate(tool);
  }
}

/** `{error: {...}}` from a failed webhook's JSON body, if that is what it sent. */
function errorObject(text: string): Record<string, unknown> | undefined {
  try {
    const body = JSON.parse(text) as { error?: unknown };
    return body?.error && typeof body.error === 'object' && !Array.isArray(body.error) ? (body.error as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
