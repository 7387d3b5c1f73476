// The decision plane over HTTP: list and register assemblies, compile a frozen plan.
import type { FastifyInstance } from 'fastify';
import { Assembly, type FrozenPlan, type PlanStep } from '../../gen/abc/decision/v1/decision.js';
import type { CoreClients } from '../core-client.js';
import { call } from '../grpc-call.js';
import { platformQuery } from '../boundary.js';
import { plainEnum } from '../mappers.js';


const stepSchema = {
  type: 'object',
  required: ['id', 'tool_name'],
  additionalProperties: false,
  properties: {
    id: { type: 'string', minLength: 1, maxLength: 64 },
    label: { type: 'string', maxLength: 256 },
    description: { type: 'string', maxLength: 2000 },
    tool_name: { type: 'string', minLength: 1, maxLength: 128 },
    fallback_tool: { type: 'string', maxLength: 128 },
    input: { type: 'object' },
    dependencies: { type: 'array', items: { type: 'string' }, maxItems: 100 },
    timeout_ms: { type: 'integer', minimum: 1 },
    expected_output: { type: 'string' },
    output_schema: { type: 'object' },
    when: { type: 'object', required: ['path'], additionalProperties: false, properties: { path: { type: 'string' }, default_value: { type: 'boolean' } } },
  },
} as const;

const assemblySchema = {
  type: 'object',
  required: ['assembly_id', 'version', 'intent', 'capabilities', 'steps'],
  additionalProperties: false,
  properties: {
    assembly_id: { type: 'string', minLength: 1, maxLength: 128 },
    version: { type: 'string', pattern: '^\\d+\\.\\d+\\.\\d+$' },
    intent: { type: 'string', minLength: 1, maxLength: 128 },
    contract: { type: 'object', required: ['contract_id', 'version'], properties: { contract_id: { type: 'string' }, version: { type: 'string' } } },
    description: { type: 'string', maxLength: 2000 },
    expected_latency_ms: { type: 'integer', minimum: 0 },
    capabilities: {
      type: 'array',
      maxItems: 100,
      items: {
        type: 'object',
        required: ['name', 'kind'],
        additionalProperties: false,
        properties: { name: { type: 'string', minLength: 1 }, kind: { enum: ['TOOL', 'LLM', 'AGENT', 'DATA_SOURCE'] }, constraints: { type: 'object' } },
      },
    },
    steps: { type: 'array', minItems: 1, maxItems: 200, items: stepSchema },
    // Seed 002 engine policy and role bindings; the core checks its full schema.
    engine: { type: 'object' },
    // The declarative output; the core checks its pointers and template.
    output: { type: 'object' },
  },
} as const;

type Json = Record<string, any>;

/** The schema-checked JSON body as the proto message; ts-proto reads snake_case names, only enum values need their prefix. */
const assemblyFromJson = (a: Json): Assembly =>
  Assembly.fromJSON({ ...a, capabilities: a.capabilities.map((c: Json) => ({ ...c, kind: `CAPABILITY_KIND_${c.kind}` })) });

const stepJson = (s: PlanStep) => ({
  id: s.id,
  label: s.label,
  ...(s.description && { description: s.description }),
  tool_name: s.toolName,
  ...(s.fallbackTool && { fallback_tool: s.fallbackTool }),
  ...(s.input && { input: s.input }),
  dependencies: s.dependencies,
  ...(s.timeoutMs !== undefined && { timeout_ms: s.timeoutMs }),
  ...(s.when && { when: { path: s.when.path, default_value: s.when.defaultValue } }),
  ...(s.outputSchema && { output_schema: s.outputSchema }),
  ...(s.skipped && { skipped: true, skip_reason: s.skipReason }),
});

const capabilityJson = (c: Assembly['capabilities'][number]) => ({ name: c.name, kind: plainEnum(c.kind, 'CAPABILITY_KIND'), ...(c.constraints && { constraints: c.constraints }) });

export const assemblyJson = (a: Assembly) => ({
  assembly_id: a.assemblyId,
  version: a.version,
  intent: a.intent,
  ...(a.contract && { contract: { contract_id: a.contract.contractId, version: a.contract.version } }),
  description: a.description,
  expected_latency_ms: a.expectedLatencyMs,
  capabilities: a.capabilities.map(capabilityJson),
  steps: a.steps.map(stepJson),
  ...(a.engine && { engine: a.engine }),
  ...(a.output && { output: a.output }),
  platform: a.platform,
});

const planJson = (p: FrozenPlan) => ({
  plan_id: p.planId,
  assembly_id: p.assemblyId,
  assembly_version: p.assemblyVersion,
  goal: p.goal,
  steps: p.steps.map(stepJson),
  whitelist: p.whitelist.map(capabilityJson),
  plan_hash: p.planHash,
  created_at: p.createdAt,
  ...(p.replacesPlanId && { replaces_plan_id: p.replacesPlanId }),
});

export function decisionRoutes(app: FastifyInstance, core: CoreClients): void {
  app.get<{ Querystring: { intent?: string } }>(
    '/v1/assemblies',
    { schema: { querystring: { type: 'object', additionalProperties: false, properties: { intent: { type: 'string', maxLength: 128 } } } } },
    async (req) => {
      const res = await call(core.decision.listAssemblies.bind(core.decision), { intent: req.query.intent ?? '' }, req);
      return { assemblies: res.assemblies.map(assemblyJson) };
    },
  );

  app.post<{ Body: Json; Querystring: { platform?: boolean } }>('/v1/assemblies', { schema: { body: assemblySchema, querystring: platformQuery } }, async (req, reply) => {
    const res = await call(core.decision.registerAssembly.bind(core.decision), { assembly: assemblyFromJson(req.body), platform: req.query.platform ?? false }, req);
    return reply.code(201).send({ assembly: assemblyJson(res.assembly!) });
  });

  app.post<{ Body: Json }>(
    '/v1/plans',
    {
      schema: {
        body: {
          type: 'object',
          required: ['intent', 'context'],
          additionalProperties: false,
          properties: {
            intent: { type: 'string', minLength: 1, maxLength: 128 },
            contract: { type: 'object', required: ['contract_id', 'version'], properties: { contract_id: { type: 'string' }, version: { type: 'string' } } },
            context: { type: 'object' },
            input: { type: 'object' },
            output_spec: { type: 'object' },
            assembly_version: { type: 'string', maxLength: 32 },
          },
        },
      },
    },
    async (req) => {
      const b = req.body;
      const res = await call(
        core.decision.plan.bind(core.decision),
        {
          intent: b.intent,
          contract: b.contract && { contractId: b.contract.contract_id, version: b.contract.version },
          context: b.context,
          input: b.input,
          outputSpec: b.output_spec,
          executionId: '',
          assemblyVersion: b.assembly_version ?? '',
        },
        req,
      );
      return { plan: planJson(res.plan!) };
    },
  );
}
