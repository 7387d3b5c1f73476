// The business contract API (seed 000): submit (sync, async or auto), the
// read-only poll with long wait, cancel, and the packaged artifact. Every
// request is validated against its contract schema, and every response
// against the schema it claims, before it is sent.
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { AbcError } from '../domain/errors.js';
import { canonicalHash } from '../domain/hash.js';
import type { Decision } from '../decision/decision.js';
import type { ContractEngine } from '../engine/engine.js';
import { appendTicketEvent, getTicket, getTicketState, notifyCancel, readLiveTicket, readTicketForPoll, ticketByIdempotencyKey, type NewTicket, type TicketEventInput, type TicketRow } from '../store/ticket-store.js';
import { newId } from '../runtime/new-id.js';
import { w3cTraceId } from '../domain/ids.js';
import { traceIdOf, traceparentIn } from '../runtime/tracing.js';
import type { Logger } from '../runtime/log.js';
import type { EventBus } from '../store/event-bus.js';
import { retryOnConflict } from '../store/outage.js';
import { settlesWithin } from '../runtime/in-flight.js';
import { waitUntil } from '../store/wake-watch.js';
import { rawEm, type Orm } from '../store/orm.js';
import { isFinished, pollDocument, pollHintMs, preferencesOf, ttlSeconds } from './projection.js';
import type { ContractCatalog } from './catalog.js';
import type { ContractVersion, SchemaKind, Violation } from './registry.js';

/** The longest a poll may wait for a change (seed 000: poll_long_wait_ms ≤ 30000). */
export const MAX_POLL_WAIT_MS = 30_000;
/** How often a sync submit waiting on a queue worker reads the ticket's state without a notification. */
const ENDED_RECHECK_MS = 1000;

export interface ContractServiceOptions {
  orm: Orm;
  bus: EventBus;
  log: Logger;
  contracts: ContractCatalog;
  decision: Decision;
  engine: ContractEngine;
  /** How long a ticket stays pollable after it was created. */
  ticketRetentionMs: number;
  /** Sessions that cannot write (see store/read-only.ts): the poll reads only through it. */
  readOnly: pg.Pool;
}

export type SubmitOutcome = { kind: 'result' | 'task'; ticket: string; document: Record<string, unknown> };

export class ContractService {
  readonly #log: Logger;

  constructor(readonly opts: ContractServiceOptions) {
    this.#log = opts.log.child({ component: 'contracts' });
  }

  /**
   * `signal` ends a sync wait early when the caller goes away; the execution goes on.
   * The ticket joins the caller's trace: a `correlation.client_trace_id` that is a W3C trace id
   * (the body's own choice), else the active span's (the call continues the caller's
   * `traceparent`); any other client_trace_id is recorded on the ticket's first event.
   */
  async submit(tenantId: string, body: unknown, signal?: AbortSignal): Promise<SubmitOutcome> {
    const received = Date.now();
    const clientTraceId = (body as { correlation?: { client_trace_id?: unknown } } | null)?.correlation?.client_trace_id;
    const traceId = w3cTraceId(clientTraceId) ?? traceIdOf() ?? randomBytes(16).toString('hex');
    const contract = await this.#contractOf(tenantId, body, traceId);
    const check = this.opts.contracts.validateRequest(contract, body);
    if (!check.ok) throw validationError(check.violations, traceId);
    const request = body as Record<string, unknown>;
    const correlation = request.correlation as { request_id: string; idempotency_key: string; session_id: string };
    const prefs = preferencesOf(request);
    const assembly = await this.opts.decision.resolve(tenantId, contract.intent);
    const expected = assembly.expected_latency_ms ?? 0;
    const sync = prefs.mode === 'sync' || (prefs.mode === 'auto' && expected <= prefs.max_latency_ms);

    // A sync submission runs in this core at once when it has room, created claimed and without a queue job: its claim is the way back.
    const slot = sync ? this.opts.engine.reserveNow() : undefined;
    const fresh = this.#fresh(newId('tkt'), tenantId, contract, request, correlation, traceId, expected);
    slot?.readAhead(fresh.ticket.ticket, tenantId, contract.intent);
    const started = slot?.start(fresh.ticket, fresh.event);
    const row = await this.#admit(fresh, started?.created);
    const ref = { request_id: correlation.request_id, session_id: correlation.session_id };
    // An idempotent replay of a finished execution answers with its outcome, whatever the mode.
    if (!sync && !isFinished(row)) return this.#accepted(contract, row, ref);

    const deadline = received + prefs.max_latency_ms;
    const ran = started && row.created ? started.ran : undefined;
    // The row the engine finished the ticket with in this core, else what the ticket's notifications lead to.
    const last = ran && (await settlesWithin(ran, deadline - Date.now(), signal)) ? await ran : undefined;
    const finished = isFinished(row) ? row : last && isFinished(last) ? last : await this.#waitFor(row.ticket, deadline, signal);
    if (finished.lifecycle_state === 'COMPLETED') {
      const document = { kind: 'result', contract: contractRef(contract), correlation: ref, result: finished.result, warnings: finished.warnings ?? [] };
      return { kind: 'result', ticket: row.ticket, document: this.#checked(contract, 'submit-response', document, finished.trace_id) };
    }
    if (finished.lifecycle_state === 'FAILED') throw ticketError(finished);
    if (finished.lifecycle_state === 'CANCELED') {
      throw new AbcError('ABORTED', { code: 'TICKET_CANCELED', category: 'EXECUTION', message: `ticket ${row.ticket} was cancelled`, retryable: false, traceId: finished.trace_id, details: { ticket: row.ticket } });
    }
    // Still running. auto degrades to a ticket; sync answers TIMEOUT carrying the ticket.
    if (prefs.mode === 'auto') return this.#accepted(contract, finished, ref);
    throw new AbcError('DEADLINE_EXCEEDED', {
      code: 'SYNC_TIMEOUT',
      category: 'TIMEOUT',
      message: `no result within max_latency_ms (${prefs.max_latency_ms} ms); the execution continues, poll ticket ${row.ticket}`,
      retryable: true,
      retryAfterSeconds: 1,
      traceId: finished.trace_id,
      details: { ticket: row.ticket, status: finished.status, poll_hint_ms: pollHintMs(finished) },
    });
  }

  /**
   * The read-only poll. It reads through sessions the database keeps read-only,
   * in one statement, and never advances, retries or replans. With a wait it
   * returns at the first change of the ticket (or at the deadline).
   */
  async poll(tenantId: string, ticket: string, waitMs?: number, signal?: AbortSignal): Promise<{ document: Record<string, unknown>; lifecycleState: string }> {
    if (waitMs !== undefined && (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > MAX_POLL_WAIT_MS)) {
      throw new AbcError('INVALID_ARGUMENT', { code: 'SCHEMA_VIOLATION', message: `wait_ms must be an integer from 0 to ${MAX_POLL_WAIT_MS}`, retryable: false, details: { pointer: '/wait_ms' } });
    }
    // A notification may be for a change the first read already saw: wait on until something visible changes.
    let seen: string | undefined;
    const view = await waitUntil(
      this.opts.bus,
      `ticket:${ticket}`,
      () => this.#read(tenantId, ticket),
      (v) => isFinished(v.row) || (seen ??= JSON.stringify(v.document)) !== JSON.stringify(v.document),
      (first) => Date.now() + (waitMs ?? preferencesOf(first.row.request).poll_long_wait_ms),
      signal,
    );
    const contract = (await this.opts.contracts.find(tenantId, view.row.contract_id, view.row.contract_version))!;
    return { document: this.#checked(contract, 'poll-response', view.document, view.row.trace_id), lifecycleState: view.row.lifecycle_state };
  }

  /** submit_human_feedback: the engine continues (or ends) an execution waiting for a human. */
  async humanFeedback(tenantId: string, ticket: string, input: Parameters<ContractEngine['submitHumanFeedback']>[1]): Promise<TicketRow> {
    const row = await getTicket(rawEm(this.opts.orm), ticket);
    if (!row || row.tenant_id !== tenantId) throw ticketNotFound(ticket);
    return this.opts.engine.submitHumanFeedback(ticket, input);
  }

  async cancel(tenantId: string, ticket: string, reason: string): Promise<{ ticket: string; status: string }> {
    // The cancel and the worker lock the ticket and its steps; a deadlock between them just runs again.
    const row = await retryOnConflict(() => this.opts.orm.em.fork().transactional(async (tx) => {
      const current = await getTicket(tx, ticket, true);
      if (!current || current.tenant_id !== tenantId) throw ticketNotFound(ticket);
      if (isFinished(current)) {
        throw new AbcError('ABORTED', {
          code: 'TICKET_FINISHED',
          category: 'VALIDATION',
          message: `ticket ${ticket} already finished as ${current.status}`,
          retryable: false,
          traceId: current.trace_id,
          details: { ticket, status: current.status },
        });
      }
      const updated = await this.opts.engine.cancel(tx, ticket);
      await appendTicketEvent(tx, ticket, 'ticket_canceled', { reason });
      // Tells the worker executing it, on whichever core, to stop.
      await notifyCancel(tx, ticket);
      return updated;
    }));
    return { ticket, status: row.status };
  }

  /** The packaged output of a succeeded ticket. */
  async artifact(tenantId: string, ticket: string): Promise<{ ticket: string; mediaType: string; content: string }> {
    const row = await readLiveTicket(this.opts.readOnly, ticket);
    if (!row || row.tenant_id !== tenantId) throw ticketNotFound(ticket);
    if (row.lifecycle_state !== 'COMPLETED' || row.artifact === null) {
      throw new AbcError('FAILED_PRECONDITION', { code: 'ARTIFACT_NOT_READY', category: 'VALIDATION', message: `ticket ${ticket} is ${row.status}; the artifact exists once it has SUCCEEDED`, retryable: row.status === 'QUEUED' || row.status === 'RUNNING', traceId: row.trace_id });
    }
    return { ticket, mediaType: row.artifact_media_type ?? 'application/json', content: row.artifact };
  }

  async #contractOf(tenantId: string, body: unknown, traceId: string): Promise<ContractVersion> {
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw validationError([{ pointer: '', keyword: 'type', message: '/ must be a JSON object' }], traceId);
    const ref = (body as { contract?: { contract_id?: unknown; version?: unknown } }).contract;
    if (ref === undefined) throw validationError([{ pointer: '/contract', keyword: 'required', message: "/ must have required property 'contract'" }], traceId);
    if (!ref || typeof ref !== 'object' || Array.isArray(ref)) throw validationError([{ pointer: '/contract', keyword: 'type', message: '/contract must be object' }], traceId);
    for (const key of ['contract_id', 'version'] as const) {
      const value = ref[key];
      if (value === undefined) throw validationError([{ pointer: `/contract/${key}`, keyword: 'required', message: `/contract must have required property '${key}'` }], traceId);
      if (typeof value !== 'string') throw validationError([{ pointer: `/contract/${key}`, keyword: 'type', message: `/contract/${key} must be string` }], traceId);
    }
    const { contract_id: id, version } = ref as { contract_id: string; version: string };
    const found = await this.opts.contracts.find(tenantId, id, version);
    if (found) return found;
    const known = await this.opts.contracts.versionsOf(tenantId, id);
    const pointer = known.length ? '/contract/version' : '/contract/contract_id';
    throw new AbcError('INVALID_ARGUMENT', {
      code: 'UNKNOWN_CONTRACT',
      message: known.length
        ? `${pointer} ${JSON.stringify(version)} is not a version of ${id}; known: ${known.map((c) => c.version).join(', ')}`
        : `${pointer} ${JSON.stringify(id)} is not a registered contract`,
      retryable: false,
      traceId,
      details: { pointer },
    });
  }

  /** The ticket a submission creates, and its first event. */
  #fresh(
    ticket: string,
    tenantId: string,
    contract: ContractVersion,
    request: Record<string, unknown>,
    correlation: { request_id: string; idempotency_key: string; session_id: string },
    traceId: string,
    expectedLatencyMs: number,
  ): { ticket: NewTicket; event: TicketEventInput } {
    const clientTraceId = (correlation as { client_trace_id?: unknown }).client_trace_id;
    return {
      ticket: {
        ticket,
        tenant_id: tenantId,
        contract_id: contract.contract_id,
        contract_version: contract.version,
        request_id: correlation.request_id,
        session_id: correlation.session_id,
        idempotency_key: correlation.idempotency_key,
        request_hash: requestHash(request),
        request,
        mode: preferencesOf(request).mode,
        trace_id: traceId,
        traceparent: traceparentIn(traceId) ?? null,
        expected_latency_ms: expectedLatencyMs,
        retention_ms: this.opts.ticketRetentionMs,
      },
      event: { type: 'ticket_created', payload: { request_id: correlation.request_id, session_id: correlation.session_id, ...(typeof clientTraceId === 'string' && { client_trace_id: clientTraceId }) } },
    };
  }

  /**
   * Creates the ticket for the queue (ContractQueue.create), in one statement;
   * or takes its creation by the core that runs it now (`created`, see
   * NowSlot.start); or finds the idempotent original.
   */
  async #admit(fresh: { ticket: NewTicket; event: TicketEventInput }, created?: Promise<TicketRow | undefined>): Promise<TicketRow & { created: boolean }> {
    const t = fresh.ticket;
    const em = rawEm(this.opts.orm);
    const inserted = await (created ?? this.opts.engine.queue.create(em, t, fresh.event));
    if (inserted) return { ...inserted, created: true };
    const existing = await ticketByIdempotencyKey(em, t.tenant_id, t.contract_id, t.idempotency_key);
    if (existing!.request_hash !== t.request_hash) {
      throw new AbcError('ALREADY_EXISTS', {
        code: 'idempotency_conflict',
        category: 'VALIDATION',
        message: `idempotency_key ${t.idempotency_key} was used for a different request (ticket ${existing!.ticket})`,
        retryable: false,
        traceId: t.trace_id,
        details: { pointer: '/correlation/idempotency_key', ticket: existing!.ticket },
      });
    }
    return { ...existing!, created: false };
  }

  #accepted(contract: ContractVersion, row: TicketRow, ref: { request_id: string; session_id: string }): SubmitOutcome {
    const document = {
      kind: 'task',
      contract: contractRef(contract),
      correlation: ref,
      task: { ticket: row.ticket, status: row.status, ttl_seconds: ttlSeconds(row, Date.now()), poll_hint_ms: pollHintMs(row) },
    };
    return { kind: 'task', ticket: row.ticket, document: this.#checked(contract, 'submit-response', document, row.trace_id) };
  }

  /** One statement, only the columns a poller may see (no step outputs, no artifact). */
  async #read(tenantId: string, ticket: string) {
    const row = await readTicketForPoll(this.opts.readOnly, ticket);
    // Another tenant's ticket does not exist for this one.
    if (!row || row.tenant_id !== tenantId) throw ticketNotFound(ticket);
    return { row, document: pollDocument(row, row.steps, Date.now()) };
  }

  /**
   * Waits until the ticket has finished or the deadline, woken by its end's
   * notification, and reads the whole row once, at the end. The state is
   * read again each second as well: the core that ended the ticket may have
   * died between its commit and that notification, which goes after it, or
   * be of an earlier version, which sends none.
   */
  async #waitFor(ticket: string, deadline: number, signal?: AbortSignal): Promise<TicketRow> {
    const em = () => rawEm(this.opts.orm);
    await waitUntil(this.opts.bus, `ticket-ended:${ticket}`, async () => (await getTicketState(em(), ticket))!, isFinished, deadline, signal, ENDED_RECHECK_MS);
    return (await getTicket(em(), ticket))!;
  }

  /** A response that would break its schema is never sent: it is logged and answered as INTERNAL. */
  #checked(contract: ContractVersion, kind: SchemaKind, document: Record<string, unknown>, traceId: string): Record<string, unknown> {
    const check = this.opts.contracts.validateResponse(contract, kind, document);
    if (check.ok) return document;
    this.#log.error({ kind, violations: check.violations, traceId }, 'response would break its contract schema; not sent');
    throw new AbcError('INTERNAL', { code: 'RESPONSE_SCHEMA_VIOLATION', message: `ABC produced a ${kind} that breaks its schema`, retryable: false, traceId });
  }
}

/** The hash idempotency compares: the request without its per-attempt correlation fields. */
export function requestHash(request: Record<string, unknown>): string {
  const { request_id: _r, sent_at: _s, client_trace_id: _c, ...correlation } = request.correlation as Record<string, unknown>;
  return canonicalHash({ ...request, correlation });
}

const contractRef = (c: ContractVersion) => ({ contract_id: c.contract_id, version: c.version });

function validationError(violations: Violation[], traceId: string): AbcError {
  const first = violations[0]!;
  return new AbcError('INVALID_ARGUMENT', {
    code: 'SCHEMA_VIOLATION',
    category: 'VALIDATION',
    message: first.message,
    retryable: false,
    traceId,
    details: { pointer: first.pointer, keyword: first.keyword, violations: violations.slice(0, 10) },
  });
}

const ticketNotFound = (ticket: string) =>
  new AbcError('NOT_FOUND', { code: 'TICKET_NOT_FOUND', category: 'VALIDATION', message: `ticket ${ticket} does not exist or has expired`, retryable: false, details: { ticket } });

/** A failed ticket's stored error, raised as the AbcError it was. */
function ticketError(row: TicketRow): AbcError {
  const e = row.error as { code: string; category: AbcError['payload']['category']; message: string; retryable: boolean; details?: Record<string, unknown> };
  const status = e.category === 'DATA_SOURCE' ? 'NOT_FOUND' : e.category === 'COMPLIANCE' ? 'PERMISSION_DENIED' : e.category === 'TIMEOUT' ? 'DEADLINE_EXCEEDED' : e.category === 'VALIDATION' ? 'INVALID_ARGUMENT' : 'INTERNAL';
  return new AbcError(status, { ...e, traceId: row.trace_id, details: { ...e.details, ticket: row.ticket } });
}
