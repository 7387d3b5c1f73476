// Session transcripts (seed 001 §7.4) and the context store (§12.1).
import type { FastifyInstance } from 'fastify';
import type { CoreClients } from '../core-client.js';
import { call } from '../grpc-call.js';
import { blobJson, messageJson } from '../mappers.js';

const sessionParams = { type: 'object', required: ['session_id'], properties: { session_id: { type: 'string', minLength: 1, maxLength: 64 } } } as const;

export function sessionRoutes(app: FastifyInstance, core: CoreClients): void {
  app.get<{ Params: { session_id: string }; Querystring: { limit: number; before?: string } }>(
    '/v1/sessions/:session_id/messages',
    {
      schema: {
        params: sessionParams,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { limit: { type: 'integer', minimum: 1, maximum: 500, default: 50 }, before: { type: 'string', maxLength: 64 } },
        },
      },
    },
    async (req) => {
      const res = await call(core.sessions.listMessages.bind(core.sessions), { sessionId: req.params.session_id, limit: req.query.limit, before: req.query.before ?? '' }, req);
      return { messages: res.messages.map(messageJson), has_more: res.hasMore };
    },
  );

  app.post<{ Params: { session_id: string }; Body: { role: string; content: string; run_id?: string; metadata?: Record<string, unknown> } }>(
    '/v1/sessions/:session_id/messages',
    {
      schema: {
        params: sessionParams,
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['role', 'content'],
          properties: {
            role: { type: 'string', enum: ['user', 'assistant', 'system'] },
            content: { type: 'string', minLength: 1, maxLength: 1_000_000 },
            run_id: { type: 'string', maxLength: 64 },
            metadata: { type: 'object' },
          },
        },
      },
    },
    async (req, reply) => {
      const b = req.body;
      const res = await call(core.sessions.appendMessage.bind(core.sessions), { sessionId: req.params.session_id, role: b.role, content: b.content, runId: b.run_id ?? '', metadata: b.metadata }, req);
      return reply.code(201).send({ message: messageJson(res.message!) });
    },
  );

  app.post<{ Body: { context_key?: string; owner_type: string; owner_id: string; data: unknown; expected_version?: number } }>(
    '/v1/context',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['owner_type', 'owner_id', 'data'],
          properties: {
            context_key: { type: 'string', minLength: 1, maxLength: 128 },
            owner_type: { type: 'string', enum: ['agent', 'session', 'run'] },
            owner_id: { type: 'string', minLength: 1, maxLength: 64 },
            data: {},
            expected_version: { type: 'integer', minimum: 0 },
          },
        },
      },
    },
    async (req) => {
      const b = req.body;
      const res = await call(
        core.context.putContext.bind(core.context),
        { contextKey: b.context_key ?? '', ownerType: b.owner_type, ownerId: b.owner_id, data: b.data, expectedVersion: b.expected_version },
        req,
      );
      return { blob: blobJson(res.blob!) };
    },
  );

  app.get<{ Params: { context_key: string }; Querystring: { version?: number } }>(
    '/v1/context/:context_key',
    {
      schema: {
        params: { type: 'object', required: ['context_key'], properties: { context_key: { type: 'string', minLength: 1, maxLength: 128 } } },
        querystring: { type: 'object', additionalProperties: false, properties: { version: { type: 'integer', minimum: 1 } } },
      },
    },
    async (req) => {
      const res = await call(core.context.getContext.bind(core.context), { contextKey: req.params.context_key, version: req.query.version }, req);
      return { blob: blobJson(res.blob!) };
    },
  );
}
