// Agent registry (seed 001 §7.3).
import type { FastifyInstance } from 'fastify';
import { RegisterAgentRequest } from '../../gen/abc/orchestrator/v1/agent.js';
import type { CoreClients } from '../core-client.js';
import type { ServiceError } from '@grpc/grpc-js';
import { fromGrpcError } from '../errors.js';
import { call, metadataOf } from '../grpc-call.js';
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
    resumable: { type: 'boolean' },
    // A token (stored as a secret of the tenant, rotated by registering again), or a secret already in the store.
    auth: {
      type: 'object',
      additionalProperties: false,
      oneOf: [{ required: ['token'] }, { required: ['secret'] }],
      properties: { type: { type: 'string', enum: ['bearer'] }, token: { type: 'string', minLength: 1, maxLength: 16384 }, secret: { type: 'string', minLength: 1, maxLength: 140 } },
    },
    metadata: { type: 'object' },
  },
} as const;

interface RegisterBody {
  agent_id: string;
  name: string;
  endpoint: string;
  capabilities?: string[];
  resumable?: boolean;
  auth?: { type?: string; token?: string; secret?: string };
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
        resumable: b.resumable ?? false,
        auth: b.auth ? { type: b.auth.type ?? 'bearer', token: b.auth.token ?? '', secret: b.auth.secret ?? '' } : undefined,
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

  // Agent-to-agent: a child run, streamed back as the agent protocol's own SSE
  // (delta, state, done, error), so a calling agent reads a child like any agent.
  app.post<{ Params: { agent_id: string }; Body: { parent_run_id: string; input_message: { role: string; content: string }; context?: Record<string, unknown> } }>(
    '/v1/agents/:agent_id(^[^:]+)::invoke',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['parent_run_id', 'input_message'],
          properties: {
            parent_run_id: { type: 'string', minLength: 1, maxLength: 64 },
            input_message: {
              type: 'object',
              additionalProperties: false,
              required: ['role', 'content'],
              properties: { role: { const: 'user' }, content: { type: 'string', minLength: 1 } },
            },
            context: { type: 'object' },
          },
        },
      },
    },
    (req, reply) => {
      const b = req.body;
      const stream = core.agents.invokeAgent({ agentId: req.params.agent_id, parentRunId: b.parent_run_id, inputMessage: b.input_message, context: b.context }, metadataOf(req));
      let opened = false;
      const write = (event: string, data: unknown) => {
        if (!opened) {
          opened = true;
          reply.hijack();
          reply.raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        }
        reply.raw.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      };
      stream.on('data', ({ event }: { event: { type: string; runId: string; payload?: Record<string, any> } }) => {
        const p = event.payload ?? {};
        if (event.type === 'run_started') write('state', { state: 'started', detail: { run_id: event.runId } });
        else if (event.type === 'agent_stream_delta') write('delta', { text: p.text, run_id: event.runId });
        else if (event.type === 'agent_state') write('state', { state: p.state, detail: p.detail ?? {} });
        else if (event.type === 'run_done') write('done', { usage: p.usage ?? {}, final_message: p.final_message ?? '', run_id: event.runId, ...(p.detail && { detail: p.detail }) });
        else if (event.type === 'run_failed') write('error', { code: p.error?.code ?? 'agent_error', message: p.error?.message ?? '', run_id: event.runId });
        else if (event.type === 'run_cancelled') write('error', { code: 'cancelled', message: p.reason ?? 'cancelled', run_id: event.runId });
      });
      stream.on('end', () => opened && reply.raw.end());
      stream.on('error', (error: ServiceError) => {
        if (opened) {
          if (error.code !== 1) write('error', fromGrpcError(error).body.error);
          reply.raw.end();
          return;
        }
        const mapped = fromGrpcError(error);
        void reply.code(mapped.statusCode).send(mapped.body);
      });
      reply.raw.on('close', () => {
        if (!reply.raw.writableFinished) stream.cancel();
      });
    },
  );

  app.post<{ Params: { agent_id: string } }>('/v1/agents/:agent_id/heartbeat', async (req) => {
    const res = await call(core.agents.heartbeat.bind(core.agents), { agentId: req.params.agent_id }, req);
    return { agent: agentJson(res.agent!) };
  });

  app.delete<{ Params: { agent_id: string } }>('/v1/agents/:agent_id', async (req) => {
    const res = await call(core.agents.deregisterAgent.bind(core.agents), { agentId: req.params.agent_id }, req);
    return { agent: agentJson(res.agent!) };
  });
}
