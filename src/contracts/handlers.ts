// IngressService contract RPCs: the seed documents ContractService produces,
// carried in their proto shapes.
import { storedErrorMessage } from '../grpc/errors.js';
import type { LifecyclePhase, StepStatus, TicketStatus } from '../../gen/abc/ingress/v1/contract.js';
import type { ContractInfo, IngressServiceService, PollTicketResponse, SubmitContractRequest, SubmitContractResponse } from '../../gen/abc/ingress/v1/ingress.js';
import { requireKey } from '../access/principal.js';
import { targetTenant } from '../access/scopes.js';
import { AbcError, invalidRequest } from '../domain/errors.js';
import { checkRequest, MAX_DEPTH } from '../grpc/boundary.js';
import type { ServiceHandlers } from '../grpc/bind.js';
import { enumOf } from '../grpc/mappers.js';
import type { ContractService } from './service.js';
import type { ContractCatalog } from './catalog.js';
import type { ContractDefinition, ContractVersion } from './registry.js';

type ContractHandlers = Pick<ServiceHandlers<typeof IngressServiceService>, 'submitContract' | 'pollTicket' | 'cancelTicket' | 'getArtifact' | 'submitHumanFeedback' | 'registerContract' | 'listContracts'>;

const HUMAN_ACTIONS = { HUMAN_ACTION_CONTINUE: 'continue', HUMAN_ACTION_REPLAN: 'replan', HUMAN_ACTION_REJECT: 'reject' } as const;

type Doc = Record<string, any>;

export function contractHandlers(service: ContractService): ContractHandlers {
  const catalog = service.opts.contracts;
  return {
    submitContract: async (req, ctx) => {
      const { tenantId } = requireKey(ctx.principal);
      return toSubmitResponse(await service.submit(tenantId, requestBody(req), ctx.signal), req.resultAsJson);
    },
    pollTicket: async (req, ctx) => {
      const { tenantId } = requireKey(ctx.principal);
      const view = await service.poll(tenantId, req.ticket, req.noWait ? 0 : req.waitMs === 0 ? undefined : req.waitMs, ctx.signal);
      return { ...toPollResponse(view.document), lifecycleState: view.lifecycleState };
    },
    submitHumanFeedback: async (req, ctx) => {
      const principal = requireKey(ctx.principal);
      if (!req.ticket) throw invalidRequest('ticket is required', 'ticket');
      const action = HUMAN_ACTIONS[req.action as keyof typeof HUMAN_ACTIONS];
      if (!action) throw invalidRequest('action must be continue, replan or reject', 'action');
      if (req.feedback.length > 10_000) throw invalidRequest('feedback is longer than 10000 characters', 'feedback');
      const row = await service.humanFeedback(principal.tenantId, req.ticket, { action, feedback: req.feedback, actor: principal.keyId, ...(req.data && { data: req.data }) });
      return { ticket: row.ticket, status: enumOf<TicketStatus>('TICKET_STATUS', row.status), lifecycleState: row.lifecycle_state };
    },
    cancelTicket: async (req, ctx) => {
      const { tenantId } = requireKey(ctx.principal);
      const out = await service.cancel(tenantId, req.ticket, req.reason);
      return { ticket: out.ticket, status: enumOf<TicketStatus>('TICKET_STATUS', out.status) };
    },
    getArtifact: async (req, ctx) => {
      const { tenantId } = requireKey(ctx.principal);
      const a = await service.artifact(tenantId, req.ticket);
      return { ticket: a.ticket, mediaType: a.mediaType, content: a.content };
    },
    registerContract: async (req, ctx) => {
      const tenantId = targetTenant(requireKey(ctx.principal), req.platform);
      if (!req.definition) throw invalidRequest('definition is required', 'definition');
      const out = await catalog.register(tenantId, req.definition as unknown as ContractDefinition);
      return { contract: toContractInfo(catalog, out.contract), created: out.created };
    },
    listContracts: async (req, ctx) => {
      const { tenantId } = requireKey(ctx.principal);
      if (req.contractId.length > 128) throw invalidRequest('contract_id is longer than 128 characters', 'contract_id');
      return { contracts: (await catalog.list(tenantId, req.contractId || undefined)).map((c) => toContractInfo(catalog, c)) };
    },
  };
}

const toContractInfo = (catalog: ContractCatalog, c: ContractVersion): ContractInfo => ({
  contractId: c.contract_id, version: c.version, intent: c.intent, description: c.description ?? '', source: c.source, schemas: c.schemas, platform: catalog.isPlatform(c),
});

const ref = (d: Doc) => ({ contractId: d.contract_id, version: d.version });
const correlation = (d: Doc) => ({ requestId: d.request_id, sessionId: d.session_id });

/** The request document: `body`, or `body_json` parsed (a caller that holds JSON need not build a Struct). */
function requestBody(req: SubmitContractRequest): unknown {
  if (!req.bodyJson.length) return req.body ?? null;
  if (req.body) throw invalidRequest('set body or body_json, not both', 'body_json');
  let body: unknown;
  try {
    // As the HTTP gateway's parser does: a key that would set an object's prototype is refused.
    body = JSON.parse(req.bodyJson.toString('utf8'), (key, value: unknown) => {
      if (key === '__proto__') throw invalidRequest('body_json must not hold a "__proto__" key', 'body_json');
      return value;
    });
  } catch (error) {
    if (error instanceof AbcError) throw error;
    // Past the stack's depth the parser throws a RangeError.
    if (error instanceof RangeError) throw invalidRequest(`the request may nest at most ${MAX_DEPTH} levels`, 'body_json');
    throw invalidRequest('body_json is not valid JSON', 'body_json');
  }
  // The boundary's checks, which a Struct body gets with the rest of the request (depth, NUL, Unicode, numbers, identifiers).
  checkRequest({ body });
  return body;
}

function toSubmitResponse(out: { kind: 'result' | 'task'; ticket: string; document: Doc }, resultAsJson = false): SubmitContractResponse {
  const d = out.document;
  if (out.kind === 'result') {
    const result = resultAsJson ? { result: undefined, resultJson: Buffer.from(JSON.stringify(d.result ?? {})) } : { result: d.result, resultJson: Buffer.alloc(0) };
    return { ticket: out.ticket, outcome: { $case: 'result', value: { contract: ref(d.contract), correlation: correlation(d.correlation), ...result, warnings: d.warnings ?? [] } } };
  }
  const t = d.task;
  return {
    ticket: out.ticket,
    outcome: {
      $case: 'task',
      value: {
        contract: ref(d.contract),
        correlation: correlation(d.correlation),
        task: { ticket: t.ticket, status: enumOf<TicketStatus>('TICKET_STATUS', t.status), ttlSeconds: t.ttl_seconds, pollHintMs: t.poll_hint_ms ?? 0 },
      },
    },
  };
}

function toPollResponse(d: Doc): Omit<PollTicketResponse, 'lifecycleState'> {
  const p = d.progress;
  return {
    contract: ref(d.contract),
    ticket: d.ticket,
    nextTicket: d.next_ticket ?? '',
    status: enumOf<TicketStatus>('TICKET_STATUS', d.status),
    ttlSeconds: d.ttl_seconds,
    progress: {
      phase: enumOf<LifecyclePhase>('LIFECYCLE_PHASE', p.phase),
      percent: p.percent,
      currentStep: p.current_step ?? '',
      steps: (p.steps ?? []).map((s: Doc) => ({
        stepId: s.step_id,
        label: s.label,
        status: enumOf<StepStatus>('STEP_STATUS', s.status),
        startedAt: s.started_at ?? '',
        endedAt: s.ended_at ?? '',
        message: s.message ?? '',
      })),
    },
    partialResult: d.partial_result,
    result: d.result,
    error: d.error && storedErrorMessage(d.error),
  };
}
