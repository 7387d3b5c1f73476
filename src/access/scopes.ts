// What each credential may call: one row per RPC. An API key needs the row's
// scope (admin holds every scope); a run token may call only the rows that say
// so. test/e2e/scopes.int.test.ts walks this table over real gRPC.
import { AbcError } from '../domain/errors.js';
import { PLATFORM_TENANT } from '../domain/ids.js';
import { DEFAULT_TENANT, type KeyPrincipal, type Principal } from './principal.js';

/**
 * - `client`: invoke agents and contracts, read its own sessions, tickets and
 *   events, decide the approvals of its users;
 * - `agent`: register and heartbeat the agents it registered;
 * - `operator`: the observer's cross-session views, metrics, policy and registries;
 * - `admin`: everything, including tenants and keys.
 */
export const SCOPES = ['client', 'agent', 'operator', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

export interface Access {
  /** The scope an API key needs; `anonymous` for a call that authenticates inside (IM's hello). */
  scope: Scope | 'anonymous';
  /** A run token may call it while its run lives (`live`), and also after it ended (`ended`). */
  runToken?: 'live' | 'ended';
  /** A browser's stream token may call it (for the run or session it names). */
  streamToken?: true;
}

const INGRESS = '/abc.ingress.v1.IngressService/';
const RUN = '/abc.orchestrator.v1.RunService/';
const AGENT = '/abc.orchestrator.v1.AgentService/';
const TOOL = '/abc.orchestrator.v1.ToolService/';
const APPROVAL = '/abc.orchestrator.v1.ApprovalService/';
const LLM = '/abc.orchestrator.v1.LlmProxyService/';
const WORKFLOW = '/abc.workflow.v1.WorkflowService/';
const SESSION = '/abc.orchestrator.v1.SessionService/';
const CONTEXT = '/abc.orchestrator.v1.ContextStoreService/';
const DECISION = '/abc.decision.v1.DecisionService/';
const OBSERVER = '/abc.observer.v1.ObserverService/';

export const RPC_ACCESS: Readonly<Record<string, Access>> = {
  [`${INGRESS}Connect`]: { scope: 'anonymous' },
  [`${INGRESS}SubmitContract`]: { scope: 'client' },
  [`${INGRESS}PollTicket`]: { scope: 'client' },
  [`${INGRESS}CancelTicket`]: { scope: 'client' },
  [`${INGRESS}GetArtifact`]: { scope: 'client' },
  [`${INGRESS}SubmitHumanFeedback`]: { scope: 'client' },
  [`${INGRESS}ListContracts`]: { scope: 'client' },
  [`${INGRESS}RegisterContract`]: { scope: 'operator' },

  [`${RUN}StartRun`]: { scope: 'client' },
  [`${RUN}CancelRun`]: { scope: 'client' },
  [`${RUN}GetRun`]: { scope: 'client', runToken: 'live' },

  [`${AGENT}RegisterAgent`]: { scope: 'agent' },
  [`${AGENT}Heartbeat`]: { scope: 'agent' },
  [`${AGENT}DeregisterAgent`]: { scope: 'agent' },
  [`${AGENT}ListAgents`]: { scope: 'operator' },
  [`${AGENT}CheckAgentHealth`]: { scope: 'operator' },
  [`${AGENT}InvokeAgent`]: { scope: 'client', runToken: 'live' },

  [`${TOOL}RegisterTool`]: { scope: 'operator' },
  [`${TOOL}ListTools`]: { scope: 'client', runToken: 'live' },
  [`${TOOL}InvokeTool`]: { scope: 'client', runToken: 'live' },
  [`${TOOL}GetToolCall`]: { scope: 'client', runToken: 'live' },
  [`${TOOL}WaitToolCall`]: { scope: 'client', runToken: 'live' },
  [`${TOOL}SubmitToolResult`]: { scope: 'client' },
  [`${TOOL}PutSecret`]: { scope: 'operator' },
  [`${TOOL}ListSecrets`]: { scope: 'operator' },
  [`${TOOL}PutPolicy`]: { scope: 'operator' },
  [`${TOOL}GetPolicy`]: { scope: 'operator' },

  [`${APPROVAL}ListApprovals`]: { scope: 'client', runToken: 'live' },
  [`${APPROVAL}DecideApproval`]: { scope: 'client' },

  [`${LLM}CreateChatCompletion`]: { scope: 'client', runToken: 'live' },
  [`${LLM}StreamChatCompletion`]: { scope: 'client', runToken: 'live' },
  [`${LLM}ListModels`]: { scope: 'client', runToken: 'live' },
  [`${LLM}CreateResponse`]: { scope: 'client', runToken: 'live' },
  [`${LLM}StreamResponse`]: { scope: 'client', runToken: 'live' },
  [`${LLM}CreateEmbedding`]: { scope: 'client', runToken: 'live' },

  [`${SESSION}GetSession`]: { scope: 'client', runToken: 'ended' },
  [`${SESSION}ListMessages`]: { scope: 'client', runToken: 'ended' },
  [`${SESSION}AppendMessage`]: { scope: 'client', runToken: 'live' },

  [`${CONTEXT}PutContext`]: { scope: 'client', runToken: 'live' },
  [`${CONTEXT}GetContext`]: { scope: 'client', runToken: 'live' },

  [`${DECISION}Plan`]: { scope: 'operator' },
  [`${DECISION}Replan`]: { scope: 'operator' },
  [`${DECISION}ListAssemblies`]: { scope: 'operator' },
  [`${DECISION}RegisterAssembly`]: { scope: 'operator' },

  [`${OBSERVER}ListEvents`]: { scope: 'client', runToken: 'live' },
  [`${OBSERVER}WatchEvents`]: { scope: 'client', runToken: 'live', streamToken: true },
  [`${OBSERVER}CreateStreamToken`]: { scope: 'client' },
  [`${OBSERVER}GetTrace`]: { scope: 'client' },
  [`${OBSERVER}GetSnapshot`]: { scope: 'operator', runToken: 'live' },
  [`${OBSERVER}GetTimeline`]: { scope: 'operator', runToken: 'live' },
  [`${OBSERVER}GetConsequenceViews`]: { scope: 'operator', runToken: 'live' },
  [`${OBSERVER}GetTopology`]: { scope: 'operator' },
  [`${OBSERVER}GetMetrics`]: { scope: 'operator' },
  [`${WORKFLOW}RegisterWorkflow`]: { scope: 'operator' },
  [`${WORKFLOW}ListWorkflows`]: { scope: 'operator' },
  [`${WORKFLOW}GetWorkflow`]: { scope: 'operator' },
  [`${WORKFLOW}GetWorkflowSession`]: { scope: 'client' },
  [`${WORKFLOW}AdvanceSession`]: { scope: 'client' },
  [`${OBSERVER}GetRunMetrics`]: { scope: 'operator' },
  [`${OBSERVER}GetToolMetrics`]: { scope: 'operator' },
  [`${OBSERVER}GetExecutionContext`]: { scope: 'operator' },
  [`${OBSERVER}SearchMemory`]: { scope: 'operator' },
};

export const hasScope = (scopes: readonly string[], scope: Scope) => scopes.includes(scope) || scopes.includes('admin');

/** The row for `method`; a method missing from the table is refused, so a new RPC cannot ship open. */
export function accessOf(method: string): Access {
  const access = RPC_ACCESS[method];
  if (!access) throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: `${method} declares no scope` });
  return access;
}

/** Throws `forbidden` when the principal may not call `method`; `ended` says a run token's run has ended. */
export function authorize(principal: Principal, method: string, ended = false): void {
  const access = accessOf(method);
  if (access.scope === 'anonymous') return;
  if (principal.kind === 'key') {
    if (hasScope(principal.scopes, access.scope)) return;
    throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: `this API key lacks the ${access.scope} scope`, details: { scope: access.scope } });
  }
  if (principal.kind === 'run' && ended && access.runToken !== 'ended') {
    throw new AbcError('UNAUTHENTICATED', { code: 'unauthenticated', message: 'this run token has expired: its run has ended (it may still read its transcript)' });
  }
  if (principal.kind === 'stream') {
    if (access.streamToken) return;
    throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: 'a stream token only reads an event stream' });
  }
  if (!access.runToken) throw new AbcError('PERMISSION_DENIED', { code: 'forbidden', message: 'this call needs an API key; a run token is not enough' });
}

/** Scopes as given on the command line (`client,agent`), checked. */
export function parseScopes(text: string): Scope[] {
  const scopes = [...new Set(text.split(',').map((s) => s.trim()).filter(Boolean))];
  const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (unknown.length > 0 || scopes.length === 0) throw new Error(`scopes must be a comma-separated list of ${SCOPES.join(', ')}`);
  return scopes as Scope[];
}

/**
 * Where a catalogue or policy call lands: the caller's tenant, or with
 * `platform` the platform's, seen by every tenant. Only the operating tenant
 * (`default`) reaches the platform's: `scope` names what its key needs
 * (admin to write, operator to read).
 */
export function targetTenant(principal: KeyPrincipal, platform: boolean, scope: Scope = 'admin'): string {
  if (!platform) return principal.tenantId;
  if (principal.tenantId === DEFAULT_TENANT && hasScope(principal.scopes, scope)) return PLATFORM_TENANT;
  throw new AbcError('PERMISSION_DENIED', {
    code: 'forbidden',
    message: `the platform's catalogue and policy need ${scope === 'admin' ? 'an admin' : `an ${scope}`} key of the ${DEFAULT_TENANT} tenant`,
    details: { scope, tenant: DEFAULT_TENANT },
  });
}
