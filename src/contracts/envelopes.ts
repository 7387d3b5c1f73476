// The envelope schemas of a contract (seed 000): its submit response, poll
// response and error, derived from its id, version and result schema, for a
// contract defined by its request and result alone.
import type { ContractManifest, SchemaKind } from '../domain/contract.js';

const STATUSES = ['QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELED'];
const PHASES = ['validate', 'resolve_context', 'plan', 'execute', 'aggregate', 'package', 'done'];
const CATEGORIES = ['VALIDATION', 'AUTH', 'DATA_SOURCE', 'EXECUTION', 'TIMEOUT', 'COMPLIANCE', 'INTERNAL'];

const closed = (required: string[], properties: Record<string, unknown>) => ({ type: 'object', required, additionalProperties: false, properties });

export function envelopeSchemas(def: ContractManifest & { schemas: { result: Record<string, unknown> } }): Record<Exclude<SchemaKind, 'request' | 'result'>, Record<string, unknown>> {
  const resultId = String(def.schemas.result.$id);
  const base = resultId.replace(/[^/]*$/, '');
  const id = (kind: string) => (base && base !== resultId ? `${base}${kind}.schema.json` : `urn:abc:contract:${def.contract_id}:${def.version}:${kind}`);
  const contract = closed(['contract_id', 'version'], { contract_id: { const: def.contract_id }, version: { const: def.version } });
  const correlation = closed(['request_id', 'session_id'], { request_id: { type: 'string' }, session_id: { type: 'string' } });
  const error = closed(['code', 'category', 'message', 'retryable'], {
    code: { type: 'string' },
    category: { type: 'string', enum: CATEGORIES },
    message: { type: 'string' },
    retryable: { type: 'boolean' },
    retry_after_seconds: { type: 'integer', minimum: 1 },
    details: { type: 'object', additionalProperties: true },
    trace_id: { type: 'string' },
  });
  const schema = (kind: string, body: Record<string, unknown>) => ({ $schema: 'https://json-schema.org/draft/2020-12/schema', $id: id(kind), ...body });
  return {
    'submit-response': schema('submit-response', {
      oneOf: [
        closed(['kind', 'contract', 'correlation', 'result'], { kind: { const: 'result' }, contract, correlation, result: { $ref: resultId }, warnings: { type: 'array', items: { type: 'string' } } }),
        closed(['kind', 'contract', 'correlation', 'task'], {
          kind: { const: 'task' },
          contract,
          correlation,
          task: closed(['ticket', 'status', 'ttl_seconds'], {
            ticket: { type: 'string' },
            status: { type: 'string', enum: ['QUEUED', 'RUNNING'] },
            ttl_seconds: { type: 'integer', minimum: 1 },
            poll_hint_ms: { type: 'integer', minimum: 0 },
          }),
        }),
      ],
    }),
    'poll-response': schema('poll-response', {
      ...closed(['contract', 'ticket', 'status', 'ttl_seconds', 'progress'], {
        contract,
        ticket: { type: 'string' },
        next_ticket: { type: 'string' },
        status: { type: 'string', enum: STATUSES },
        ttl_seconds: { type: 'integer', minimum: 1 },
        progress: closed(['phase', 'percent'], {
          phase: { type: 'string', enum: PHASES },
          percent: { type: 'integer', minimum: 0, maximum: 100 },
          current_step: { type: 'string' },
          steps: {
            type: 'array',
            items: closed(['step_id', 'label', 'status'], {
              step_id: { type: 'string' },
              label: { type: 'string' },
              status: { type: 'string', enum: ['PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'SKIPPED'] },
              started_at: { type: 'string', format: 'date-time' },
              ended_at: { type: 'string', format: 'date-time' },
              message: { type: 'string' },
            }),
          },
        }),
        partial_result: { type: 'object', additionalProperties: true },
        result: { $ref: resultId },
        error,
      }),
    }),
    error: schema('error', error),
  };
}
