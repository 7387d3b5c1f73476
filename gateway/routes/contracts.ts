// The business contract API (seed 000) over HTTP: submit, read-only poll with
// long wait, cancel, and the packaged artifact. The core validates every body
// against the contract's own JSON Schema; these routes only shape the wire.
import type { FastifyInstance } from 'fastify';
import type { ContractInfo, PollTicketResponse, SubmitContractResponse } from '../../gen/abc/ingress/v1/ingress.js';
import type { CoreClients } from '../core-client.js';
import { errorBody } from '../errors.js';
import { call } from '../grpc-call.js';
import { platformQuery } from '../boundary.js';
import { plainEnum } from '../mappers.js';

export const ticketParams = { type: 'object', required: ['ticket'], properties: { ticket: { type: 'string', minLength: 1, maxLength: 64 } } } as const;

const ref = (c: { contractId: string; version: string } | undefined) => ({ contract_id: c?.contractId ?? '', version: c?.version ?? '' });
const correlation = (c: { requestId: string; sessionId: string } | undefined) => ({ request_id: c?.requestId ?? '', session_id: c?.sessionId ?? '' });

/**
 * The submit response's body. A result the core sent as JSON text goes out as
 * that text, spliced in, not parsed and written again.
 */
export function submitJson(res: SubmitContractResponse): Record<string, unknown> | string {
  const o = res.outcome!;
  if (o.$case === 'result') {
    const head = { kind: 'result', contract: ref(o.value.contract), correlation: correlation(o.value.correlation) };
    if (o.value.resultJson.length) return `${JSON.stringify(head).slice(0, -1)},"result":${o.value.resultJson.toString('utf8')},"warnings":${JSON.stringify(o.value.warnings)}}`;
    return { ...head, result: o.value.result ?? {}, warnings: o.value.warnings };
  }
  const t = o.value.task!;
  return {
    kind: 'task',
    contract: ref(o.value.contract),
    correlation: correlation(o.value.correlation),
    task: { ticket: t.ticket, status: plainEnum(t.status, 'TICKET_STATUS'), ttl_seconds: t.ttlSeconds, poll_hint_ms: t.pollHintMs },
  };
}

export function pollJson(res: PollTicketResponse): Record<string, unknown> {
  const p = res.progress!;
  const e = res.error;
  return {
    contract: ref(res.contract),
    ticket: res.ticket,
    ...(res.nextTicket && { next_ticket: res.nextTicket }),
    status: plainEnum(res.status, 'TICKET_STATUS'),
    ttl_seconds: res.ttlSeconds,
    progress: {
      phase: plainEnum(p.phase, 'LIFECYCLE_PHASE').toLowerCase(),
      percent: p.percent,
      ...(p.currentStep && { current_step: p.currentStep }),
      ...(p.steps.length > 0 && {
        steps: p.steps.map((s) => ({
          step_id: s.stepId,
          label: s.label,
          status: plainEnum(s.status, 'STEP_STATUS'),
          ...(s.startedAt && { started_at: s.startedAt }),
          ...(s.endedAt && { ended_at: s.endedAt }),
          ...(s.message && { message: s.message }),
        })),
      }),
    },
    ...(res.partialResult && { partial_result: res.partialResult }),
    ...(res.result && { result: res.result }),
    ...(e && { error: errorBody(e) }),
  };
}

const contractJson = (c: ContractInfo) => ({ contract_id: c.contractId, version: c.version, intent: c.intent, ...(c.description && { description: c.description }), source: c.source, platform: c.platform, schemas: c.schemas ?? {} });

const schemaObject = { type: 'object', required: ['$id'], properties: { $id: { type: 'string', minLength: 1, maxLength: 512 } } } as const;
/** The shape of a definition; the core checks the rest (ids, versions, compilable schemas, additivity). */
const definitionSchema = {
  type: 'object',
  required: ['contract_id', 'version', 'intent', 'schemas'],
  additionalProperties: false,
  properties: {
    contract_id: { type: 'string', minLength: 1, maxLength: 128 },
    version: { type: 'string', pattern: '^\\d+\\.\\d+\\.\\d+$', maxLength: 32 },
    intent: { type: 'string', minLength: 1, maxLength: 128 },
    description: { type: 'string', maxLength: 2000 },
    schemas: {
      type: 'object',
      required: ['request', 'result'],
      additionalProperties: false,
      properties: { request: schemaObject, result: schemaObject, 'submit-response': schemaObject, 'poll-response': schemaObject, error: schemaObject },
    },
  },
} as const;

export function contractRoutes(app: FastifyInstance, core: CoreClients): void {
  app.post<{ Body: Record<string, unknown>; Querystring: { platform?: boolean } }>('/v1/contracts', { schema: { body: definitionSchema, querystring: platformQuery }, bodyLimit: 1024 * 1024 }, async (req, reply) => {
    const res = await call(core.ingress.registerContract.bind(core.ingress), { definition: req.body, platform: req.query.platform ?? false }, req);
    return reply.code(res.created ? 201 : 200).send({ contract: contractJson(res.contract!), created: res.created });
  });

  app.get<{ Querystring: { contract_id?: string } }>(
    '/v1/contracts',
    { schema: { querystring: { type: 'object', additionalProperties: false, properties: { contract_id: { type: 'string', maxLength: 128 } } } } },
    async (req) => {
      const res = await call(core.ingress.listContracts.bind(core.ingress), { contractId: req.query.contract_id ?? '' }, req);
      return { contracts: res.contracts.map(contractJson) };
    },
  );

  app.post<{ Body: Record<string, unknown> }>(
    '/v1/contracts::submit',
    { schema: { body: { type: 'object' } }, bodyLimit: 1024 * 1024 },
    async (req, reply) => {
      // The body goes on as the JSON it came as, and the result comes back as JSON: no Struct on either side.
      const res = await call(core.ingress.submitContract.bind(core.ingress), { body: undefined, bodyJson: Buffer.from(JSON.stringify(req.body)), resultAsJson: true }, req);
      reply.header('x-abc-ticket', res.ticket);
      reply.header('link', `</v1/tickets/${res.ticket}/artifact>; rel="artifact"`);
      if (res.outcome?.$case === 'task') reply.code(202);
      const body = submitJson(res);
      if (typeof body === 'string') reply.type('application/json; charset=utf-8');
      return body;
    },
  );

  app.get<{ Params: { ticket: string }; Querystring: { wait_ms?: number } }>(
    '/v1/tickets/:ticket',
    { schema: { params: ticketParams, querystring: { type: 'object', additionalProperties: false, properties: { wait_ms: { type: 'integer', minimum: 0, maximum: 30000 } } } } },
    async (req, reply) => {
      const res = await call(core.ingress.pollTicket.bind(core.ingress), { ticket: req.params.ticket, waitMs: req.query.wait_ms ?? 0, noWait: req.query.wait_ms === 0 }, req);
      // The body is the contract's schema; the engine's own state (WAIT_HUMAN, ...) rides in a header.
      if (res.lifecycleState) reply.header('x-abc-lifecycle-state', res.lifecycleState);
      return pollJson(res);
    },
  );

  app.post<{ Params: { ticket: string }; Body: { reason?: string } | undefined }>(
    '/v1/tickets/:ticket(^[^:/]+)::cancel',
    { schema: { params: ticketParams, body: { type: ['object', 'null'], additionalProperties: false, properties: { reason: { type: 'string', maxLength: 1000 } } } } },
    async (req) => {
      const res = await call(core.ingress.cancelTicket.bind(core.ingress), { ticket: req.params.ticket, reason: req.body?.reason ?? '' }, req);
      return { ticket: res.ticket, status: plainEnum(res.status, 'TICKET_STATUS') };
    },
  );

  app.get<{ Params: { ticket: string } }>('/v1/tickets/:ticket/artifact', { schema: { params: ticketParams } }, async (req, reply) => {
    const res = await call(core.ingress.getArtifact.bind(core.ingress), { ticket: req.params.ticket }, req);
    return reply.type(res.mediaType).send(res.content);
  });
}
