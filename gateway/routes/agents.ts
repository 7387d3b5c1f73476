// Agent registry (seed 001 §7.3).
import type { FastifyInstance } from 'fastify';
import { RegisterAgentRequest } from '../../gen/abc/orchestrator/v1/agent.js';
import type { CoreClients } from '../core-client.js';
import { call } from '../grpc-call.js';
import { agentJson } from '../mappers.js';

const registerBody = {
  type: 'object',
  additionalProperties: false,
  required: ['agent_id', 'name', 'endpoint'],
  properties: {
    agent_id: { type: 'string', minLength: 1, maxLength: 64 },
    name: { type: 'string', minLength: 1, maxLength: 256 },
    endpoint: { type: 'string', minLength: 1, maxLength: 512 },
    capabilities: { type: 'array', items: { type: 'string' }, maxItems: 100 },
    auth: {
      type: 'object',
      additionalProperties: false,
      required: ['token'],
      properties: { type: { type: 'string', enum: ['bearer'] }, token: { type: 'string', minLength: 1 } },
    },
    metadata: { type: 'object' },
  },
} as const;

interface RegisterBody {
  agent_id: string;
  name: string;
  endpoint: string;
  capabilities?: string[];
  auth?: { type?: string; token: string };
  metadata?: Record<string, unknown>;
}

export function agentRoutes(app: FastifyInstance, core: CoreClients): void {
  app.post<{ Body: RegisterBody }>('/v1/agents/register', { schema: { body: registerBody } }, async (req) => {
    const b = req.body;
    const res = await call(
      core.agents.registerAgent.bind(core.agents),
      RegisterAgentRequest.fromPartial({
        agentId: b.agent_id,
        name: b.name,
        endpoint: b.endpoint,
        capabilities: b.capabilities ?? [],
        auth: b.auth ? { type: b.auth.type ?? 'bearer', token: b.auth.token } : undefined,
        metadata: b.metadata,
      }),
      req,
    );
    return { ok: res.ok, registered_at: res.registeredAt };
  });

  app.get('/v1/agents', async (req) => {
    const res = await call(core.agents.listAgents.bind(core.agents), {}, req);
    return { agents: res.agents.map(agentJson) };
  });

  app.post<{ Params: { agent_id: string } }>('/v1/agents/:agent_id/heartbeat', async (req) => {
    const res = await call(core.agents.heartbeat.bind(core.agents), { agentId: req.params.agent_id }, req);
    return { agent: agentJson(res.agent!) };
  });
}
