// gRPC handlers of the orchestrator plane: runs, agents, sessions, context store.
import { storedErrorMessage } from '../grpc/errors.js';
import { AgentServiceService, type Agent as AgentMessage, type AgentStatus } from '../../gen/abc/orchestrator/v1/agent.js';
import type { ContextBlob, ContextStoreServiceService } from '../../gen/abc/orchestrator/v1/context.js';
import type { Run, RunServiceService, RunStatus } from '../../gen/abc/orchestrator/v1/run.js';
import type { Message, SessionServiceService } from '../../gen/abc/orchestrator/v1/session.js';
import { defaultUser, requireKey, requireRun, requireSession, speaksFor, tenantOf, type KeyPrincipal, type Principal } from '../access/principal.js';
import { hasScope } from '../access/scopes.js';
import { AbcError, invalidRequest, notFound, pageLimit } from '../domain/errors.js';
import type { ServiceHandlers } from '../grpc/bind.js';
import { enumOf, millis, toEventMessage } from '../grpc/mappers.js';
import type { Orm } from '../store/orm.js';
import { checkAgent, checkRegistration, deleteAgent, getAgent, heartbeat, listAgents, registerAgent, type AgentRow, type HealthOptions } from './agents.js';
import { getContext, getContextOrFail, putContext, type ContextBlobRow } from '../store/context-store.js';
import type { RunRow } from '../store/run-store.js';
import { Runs } from './runs.js';
import { appendMessage, getSession, listMessages, type MessageRow } from '../store/session-store.js';

export const toRunMessage = (r: RunRow): Run => ({
  runId: r.runId,
  sessionId: r.sessionId,
  rootAgentId: r.rootAgentId,
  parentRunId: r.parentRunId ?? '',
  status: enumOf<RunStatus>('RUN_STATUS', r.status),
  startedAt: millis(r.startedAt),
  endedAt: millis(r.endedAt),
  error: r.error ? storedErrorMessage(r.error, r.traceId) : undefined,
  requestId: r.requestId ?? '',
  traceId: r.traceId,
});

/** The agent as listed: the auth token is write-only and never leaves ABC. */
export const toAgentMessage = (a: AgentRow): AgentMessage => ({
  agentId: a.agentId,
  name: a.name,
  endpoint: a.endpoint,
  capabilities: a.capabilities,
  resumable: a.resumable,
  status: enumOf<AgentStatus>('AGENT_STATUS', a.status),
  lastHeartbeatAt: millis(a.lastHeartbeat),
  registeredAt: millis(a.createdAt),
  statusReason: a.statusReason ?? '',
});

const toMessage = (m: MessageRow): Message => ({
  messageId: m.messageId,
  sessionId: m.sessionId,
  runId: m.runId ?? '',
  role: m.role,
  content: m.content,
  createdAt: millis(m.createdAt),
  metadata: m.metadata ?? undefined,
});

const toBlob = (b: ContextBlobRow): ContextBlob => ({
  contextKey: b.contextKey,
  ownerType: b.ownerType,
  ownerId: b.ownerId,
  version: b.version,
  data: b.data,
  createdAt: millis(b.createdAt),
  updatedAt: millis(b.updatedAt),
});

export function runHandlers(runs: Runs): ServiceHandlers<typeof RunServiceService> {
  return {
    async *startRun(req, ctx) {
      const principal = requireKey(ctx.principal);
      const userId = req.userId || defaultUser(principal);
      if (!speaksFor(principal, userId)) throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: `this API key does not speak for user ${userId}`, details: { field: 'user_id' } });
      const started = await runs.start({
        sessionId: req.sessionId,
        agentId: req.agentId,
        message: req.message ?? { role: 'user', content: '' },
        requestId: req.requestId || undefined,
        userId,
        tenantId: principal.tenantId,
        context: req.context,
      });
      const run = toRunMessage(started.run);
      for await (const event of runs.follow(started.run.runId, started.cursorBefore, ctx.signal)) {
        yield { run, event: toEventMessage(event) };
      }
    },
    async cancelRun(req, ctx) {
      const principal = requireKey(ctx.principal);
      requireRun(principal, await runs.find(req.runId), req.runId);
      return { run: toRunMessage(await runs.cancel(req.runId, req.reason, `key:${principal.keyId}`)) };
    },
    async getRun(req, ctx) {
      const run = requireRun(ctx.principal, await runs.find(req.runId), req.runId);
      return { run: toRunMessage(run) };
    },
  };
}

export function agentHandlers(orm: Orm, health: HealthOptions, runs: Runs): ServiceHandlers<typeof AgentServiceService> {
  const em = () => orm.em.fork();
  async function agentAuth(tenantId: string, agentId: string, auth: { type: string; token: string; secret: string } | undefined) {
    const stored = auth && (await health.secrets.agentCredential(tenantId, agentId, auth));
    return stored ? { type: auth!.type || 'bearer', token: stored } : undefined;
  }

  /** A key with only the agent scope changes only the agents it registered; a new id is its to take. */
  async function requireAgentOwner(principal: KeyPrincipal, agentId: string, mayCreate: boolean): Promise<void> {
    if (hasScope(principal.scopes, 'operator')) return;
    const agent = await getAgent(em(), principal.tenantId, agentId);
    if (!agent && mayCreate) return;
    if (!agent) throw notFound('agent', agentId);
    if (agent.ownerKeyId !== principal.keyId) throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: `agent ${agentId} was registered by another key` });
  }
  return {
    /** A child run for an agent-to-agent call; its events stream back until it ends. */
    async *invokeAgent(req, ctx) {
      if (!req.parentRunId) throw invalidRequest('parent_run_id is required', 'parent_run_id');
      if (ctx.principal?.kind === 'run' && ctx.principal.runId !== req.parentRunId) {
        throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: 'a run token may call agents only as its own run' });
      }
      requireRun(ctx.principal, await runs.find(req.parentRunId), req.parentRunId);
      const started = await runs.startChild({
        agentId: req.agentId,
        parentRunId: req.parentRunId,
        message: req.inputMessage ?? { role: 'user', content: '' },
        context: req.context,
      });
      for await (const event of runs.follow(started.run.runId, started.cursorBefore, ctx.signal)) yield { event: toEventMessage(event) };
    },
    async registerAgent(req, ctx) {
      const principal = requireKey(ctx.principal);
      // Checked before its token is stored, so a refused registration leaves no secret behind.
      checkRegistration(req);
      await requireAgentOwner(principal, req.agentId, true);
      const agent = await registerAgent(em(), {
        tenantId: principal.tenantId,
        agentId: req.agentId,
        ownerKeyId: principal.keyId,
        name: req.name,
        endpoint: req.endpoint,
        capabilities: req.capabilities,
        resumable: req.resumable,
        // Stored sealed: the token is write-only and never at rest in plaintext.
        // Stored as a reference to a secret of the tenant: the token itself is never in the agents table.
        auth: await agentAuth(principal.tenantId, req.agentId, req.auth),
        metadata: req.metadata,
      });
      return { ok: true, registeredAt: millis(agent.lastHeartbeat), agent: toAgentMessage(agent) };
    },
    async listAgents(_req, ctx) {
      return { agents: (await listAgents(em(), requireKey(ctx.principal).tenantId)).map(toAgentMessage) };
    },
    async heartbeat(req, ctx) {
      // Marking an agent healthy routes users to it: not something a run token may do.
      const principal = requireKey(ctx.principal);
      await requireAgentOwner(principal, req.agentId, false);
      return { agent: toAgentMessage(await heartbeat(em(), principal.tenantId, req.agentId)) };
    },
    async deregisterAgent(req, ctx) {
      const principal = requireKey(ctx.principal);
      if (!req.agentId) throw invalidRequest('agent_id is required', 'agent_id');
      await requireAgentOwner(principal, req.agentId, false);
      const removed = await deleteAgent(em(), principal.tenantId, req.agentId);
      if (!removed) throw notFound('agent', req.agentId);
      ctx.log.info({ agentId: req.agentId, tenantId: principal.tenantId }, 'agent deregistered');
      return { agent: toAgentMessage(removed) };
    },
    async checkAgentHealth(req, ctx) {
      const agent = await getAgent(em(), requireKey(ctx.principal).tenantId, req.agentId);
      if (!agent) throw notFound('agent', req.agentId);
      return { agent: toAgentMessage((await checkAgent(health, agent)) ?? agent) };
    },
  };
}

export function sessionHandlers(orm: Orm): ServiceHandlers<typeof SessionServiceService> {
  const em = () => orm.em.fork();
  return {
    async getSession(req, ctx) {
      const session = await getSession(em(), req.sessionId);
      requireSession(ctx.principal, session, req.sessionId);
      if (!session) throw notFound('session', req.sessionId);
      return { session: { sessionId: session.sessionId, userId: session.userId, createdAt: millis(session.createdAt), metadata: session.metadata ?? undefined } };
    },
    async listMessages(req, ctx) {
      requireSession(ctx.principal, await getSession(em(), req.sessionId), req.sessionId);
      const page = await listMessages(em(), req.sessionId, pageLimit(req.limit, 50, 500), req.before || undefined);
      return { messages: page.messages.map(toMessage), hasMore: page.hasMore };
    },
    async appendMessage(req, ctx) {
      if (!req.content) throw invalidRequest('content is required', 'content');
      const message = await em().transactional(async (tx) => {
        const session = await getSession(tx, req.sessionId);
        requireSession(ctx.principal, session, req.sessionId);
        if (!session) throw notFound('session', req.sessionId);
        return appendMessage(tx, { sessionId: req.sessionId, role: req.role, content: req.content, runId: req.runId || null, metadata: req.metadata });
      });
      return { message: toMessage(message) };
    },
  };
}

export function contextHandlers(orm: Orm): ServiceHandlers<typeof ContextStoreServiceService> {
  const em = () => orm.em.fork();
  return {
    async putContext(req, ctx) {
      if (ctx.principal?.kind === 'run' && !ownsContext(ctx.principal, req.ownerType, req.ownerId)) {
        throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: 'a run token may write only the context of its run, its session or its agent' });
      }
      return {
        blob: toBlob(
          await em().transactional(async (tx) => {
            // Writing to an existing key is writing to its owner's blob.
            const current = ctx.principal?.kind === 'run' && req.contextKey ? await getContext(tx, tenantOf(ctx.principal), req.contextKey) : undefined;
            if (current && ctx.principal?.kind === 'run' && !ownsContext(ctx.principal, current.ownerType, current.ownerId)) throw notFound('context', req.contextKey);
            return putContext(tx, { ...req, data: req.data, tenantId: tenantOf(ctx.principal) });
          }),
        ),
      };
    },
    async getContext(req, ctx) {
      const blob = await getContextOrFail(em(), tenantOf(ctx.principal), req.contextKey, req.version);
      // Another owner's blob does not exist for a run token.
      if (ctx.principal?.kind === 'run' && !ownsContext(ctx.principal, blob.ownerType, blob.ownerId)) throw notFound('context', req.contextKey);
      return { blob: toBlob(blob) };
    },
  };
}

/** A run token reaches only its run, its session and its agent. */
function ownsContext(principal: Extract<Principal, { kind: 'run' }>, ownerType: string, ownerId: string): boolean {
  return (
    (ownerType === 'run' && ownerId === principal.runId) ||
    (ownerType === 'session' && ownerId === principal.sessionId) ||
    (ownerType === 'agent' && ownerId === principal.agentId)
  );
}
