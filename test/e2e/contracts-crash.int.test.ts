// A core killed in the middle of execute loses nothing: after a restart the
// ticket completes, and steps that had finished are not run again.
import { SubmitContractRequest } from '../../gen/abc/ingress/v1/ingress.js';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Tool, ToolKind } from '../../gen/abc/orchestrator/v1/tool.js';
import { closeCore, connectCore } from '../../gateway/core-client.js';
import { startCore, type Core } from '../../src/main/core.js';
import { assemblyMessage, importSamplePortfolios, referenceAssembly, request } from '../support/contracts.js';
import { FAST_RETRY, coreOptions } from '../support/core.js';
import { migratedOrm } from '../support/db.js';
import { unary, withKey } from '../support/grpc.js';
import { startChildCore } from '../support/child-core.js';

const KEY = 'abc_contract_crash_key_0123456789';
const LEASE_MS = 500;

let store: Awaited<ReturnType<typeof migratedOrm>>;
let webhook: http.Server;
let url: string;
const calls = { audit: 0, gate: 0 };
let gateReached: () => void;
let gateCalled: Promise<void>;
/** From now on, the first gate call never answers. */
const hangFirstGate = () => {
  calls.audit = calls.gate = 0;
  gateCalled = new Promise<void>((r) => (gateReached = r));
};

beforeAll(async () => {
  store = await migratedOrm();
  await importSamplePortfolios(store.orm);
  // The first gate call never answers: the core is killed while it waits.
  webhook = http.createServer(async (req, res) => {
    for await (const _ of req);
    const which = req.url === '/gate' ? 'gate' : 'audit';
    calls[which]++;
    if (which === 'gate' && calls.gate === 1) return gateReached();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, n: calls[which] }));
  });
  await new Promise<void>((r) => webhook.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(webhook.address() as AddressInfo).port}`;
});
afterAll(async () => {
  webhook.closeAllConnections();
  await new Promise((r) => webhook.close(r));
  await store.close();
});

/** An assembly whose `gate` step calls a webhook that can hang. */
async function registerAuditAssembly(clients: ReturnType<typeof connectCore>): Promise<void> {
  const meta = withKey(KEY);
  // Both write: each step's start is committed before it runs (write-ahead), so a crash finds the gate RUNNING.
  for (const name of ['audit', 'gate']) {
    await unary(clients.tools.registerTool.bind(clients.tools), { tool: Tool.fromPartial({ name: `audit.${name}`, kind: ToolKind.TOOL_KIND_SERVER_HTTP, endpoint: `${url}/${name}`, timeoutMs: 60_000, sideEffect: true }) }, meta);
  }
  const a = referenceAssembly();
  a.version = '1.1.0';
  a.capabilities.push({ name: 'tool.audit.audit', kind: 'TOOL' }, { name: 'tool.audit.gate', kind: 'TOOL' });
  a.steps.push(
    { id: 'audit', label: 'Record an audit entry', tool_name: 'tool.audit.audit', input: { as_of: '$.context.as_of' }, dependencies: ['value_positions'] },
    { id: 'gate', label: 'Wait for the compliance gate', tool_name: 'tool.audit.gate', input: {}, dependencies: ['audit'] },
  );
  a.steps.find((x: { id: string }) => x.id === 'highlights').dependencies.push('gate');
  await unary(clients.decision.registerAssembly.bind(clients.decision), { assembly: assemblyMessage(a), platform: false }, meta);

}

/** An in-process core on the same database, with one worker, to take over tickets. */
async function nextCore(): Promise<{ clients: ReturnType<typeof connectCore>; close(): Promise<void> }> {
  const core: Core = await startCore(coreOptions(store.orm, { retry: FAST_RETRY, drainTimeoutMs: 500, contracts: { workers: 1, leaseMs: LEASE_MS } }));
  const clients = connectCore(core.address);
  return { clients, close: async () => (closeCore(clients), await core.close()) };
}

/** Long-polls until the ticket stops running; its final status. */
async function finalStatus(clients: ReturnType<typeof connectCore>, ticket: string): Promise<string> {
  let poll;
  for (let i = 0; i < 40; i++) {
    poll = await unary(clients.ingress.pollTicket.bind(clients.ingress), { ticket, waitMs: 1000, noWait: false }, withKey(KEY));
    if (poll.status !== 'TICKET_STATUS_RUNNING') break;
  }
  return poll!.status;
}

/** A fresh core finishes the ticket, with each step's work done once (the gate twice: it was cut off once). */
async function completesOnNextCore(ticket: string): Promise<void> {
  const next = await nextCore();
  try {
    expect(await finalStatus(next.clients, ticket)).toBe('TICKET_STATUS_SUCCEEDED');
    expect(calls).toEqual({ audit: 1, gate: 2 });
  } finally {
    await next.close();
  }
}

const childCore = (env: Record<string, string> = {}) =>
  startChildCore({ DATABASE_URL: store.db.url, ABC_API_KEYS: KEY, ABC_CONTRACT_LEASE_MS: String(LEASE_MS), ABC_CONTRACT_WORKERS: '1', ...env });

/** A sync submission on a child core, held at the gate while the submitting core runs it (not a queue worker). */
async function syncRunningInCore(env: Record<string, string> = {}) {
  hangFirstGate();
  const { child, clients } = await childCore(env);
  await registerAuditAssembly(clients);
  // A sync submission that never answers: its core stops first.
  const answer = unary(clients.ingress.submitContract.bind(clients.ingress), SubmitContractRequest.fromPartial({ body: request({ execution_preferences: { mode: 'sync', max_latency_ms: 60_000 } }) }), withKey(KEY)).catch((error: Error) => error);
  await gateCalled;
  const [running] = await store.orm.em.fork().execute<{ ticket: string; lease_owner: string }[]>("SELECT ticket, lease_owner FROM tickets WHERE lifecycle_state = 'STEP_EXECUTION' ORDER BY created_at DESC LIMIT 1");
  expect(running!.lease_owner).toBe(`now-${running!.ticket}`);
  return { child, clients, answer, ticket: running!.ticket };
}

it('completes the ticket after a restart without re-running finished steps', async () => {
  hangFirstGate();
  const { child, clients } = await childCore();
  const meta = withKey(KEY);
  await registerAuditAssembly(clients);
  const submitted = await unary(clients.ingress.submitContract.bind(clients.ingress), SubmitContractRequest.fromPartial({ body: request() }), meta);
  const ticket = submitted.ticket;
  await gateCalled;
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  closeCore(clients);

  const em = store.orm.em.fork();
  const before = await em.execute<{ step_id: string; status: string }[]>('SELECT step_id, status FROM ticket_steps WHERE ticket = ? ORDER BY position', [ticket]);
  expect(before.find((x) => x.step_id === 'audit')!.status).toBe('SUCCEEDED');
  expect(before.find((x) => x.step_id === 'gate')!.status).toBe('RUNNING');

  const recoverer = await nextCore();
  try {
    expect(await finalStatus(recoverer.clients, ticket)).toBe('TICKET_STATUS_SUCCEEDED');
    expect(calls).toEqual({ audit: 1, gate: 2 });
    const events = await em.execute<{ payload: { step_id?: string; trigger: string } }[]>("SELECT payload FROM ticket_events WHERE ticket = ? AND type = 'step_transition' ORDER BY seq", [ticket]);
    expect(events.filter((e) => e.payload.step_id === 'gate').map((e) => e.payload.trigger)).toEqual(['start', 'restart', 'succeed']);
    expect(events.filter((e) => e.payload.step_id === 'audit').map((e) => e.payload.trigger)).toEqual(['start', 'succeed']);
  } finally {
    await recoverer.close();
  }
}, 60_000);

it('hands a ticket back within the shutdown grace period on SIGTERM, and the next core completes it', async () => {
  hangFirstGate();
  const { child, clients } = await childCore({ ABC_SHUTDOWN_GRACE_MS: '1000' });
  const meta = withKey(KEY);
  await registerAuditAssembly(clients);
  const { ticket } = await unary(clients.ingress.submitContract.bind(clients.ingress), SubmitContractRequest.fromPartial({ body: request() }), meta);
  await gateCalled;
  const stopping = Date.now();
  child.kill('SIGTERM');
  const code = await new Promise((r) => child.once('exit', r));
  const stoppedInMs = Date.now() - stopping;
  closeCore(clients);
  expect(code).toBe(0);
  // The gate's webhook never answers: only the grace period ends the wait (before: 140 s).
  expect(stoppedInMs).toBeLessThan(10_000);
  const em = store.orm.em.fork();
  const jobs = await em.execute<{ n: number }[]>("SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE key = ? AND locked_at IS NULL", [ticket]);
  expect(jobs[0]!.n).toBe(1);

  await completesOnNextCore(ticket);
}, 60_000);

it('runs a sync submission in the submitting core, and when that core dies mid-run another completes it once its claim lapses', async () => {
  const { child, clients, answer, ticket } = await syncRunningInCore();
  // Its core's claim is the way back: the ticket has no queue job while it runs.
  const jobs = await store.orm.em.fork().execute<{ n: number }[]>('SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE key = ?', [ticket]);
  expect(jobs[0]!.n).toBe(0);
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  expect(await answer).toBeInstanceOf(Error);
  closeCore(clients);

  await completesOnNextCore(ticket);
}, 60_000);

it('answers a sync submission from the submitting core and leaves no queue job behind', async () => {
  const next = await nextCore();
  try {
    const submitted = await unary(next.clients.ingress.submitContract.bind(next.clients.ingress), SubmitContractRequest.fromPartial({ body: request({ execution_preferences: { mode: 'sync' } }) }), withKey(KEY));
    expect(submitted.outcome?.$case).toBe('result');
    const em = store.orm.em.fork();
    const [row] = await em.execute<{ lease_owner: string | null; n: number }[]>('SELECT lease_owner, (SELECT count(*)::int FROM graphile_worker._private_jobs WHERE key = t.ticket) AS n FROM tickets t WHERE ticket = ?', [submitted.ticket]);
    expect(row).toEqual({ lease_owner: null, n: 0 });
    const moves = await em.execute<{ payload: { to: string } }[]>("SELECT payload FROM ticket_events WHERE ticket = ? AND type = 'STATE_TRANSITION' ORDER BY seq", [submitted.ticket]);
    expect(moves.at(-1)!.payload.to).toBe('COMPLETED');
  } finally {
    await next.close();
  }
}, 60_000);

it('hands a sync submission running in its core back within the grace period on SIGTERM, ready to run at once', async () => {
  const { child, clients, answer, ticket } = await syncRunningInCore({ ABC_SHUTDOWN_GRACE_MS: '1000', ABC_CONTRACT_LEASE_MS: '30000' });
  child.kill('SIGTERM');
  expect(await new Promise((r) => child.once('exit', r))).toBe(0);
  await answer;
  closeCore(clients);
  // Handed back, not left to its 30 s deferral: a worker may take it now.
  const [job] = await store.orm.em.fork().execute<{ due: boolean; locked: boolean }[]>('SELECT run_at <= now() AS due, locked_at IS NOT NULL AS locked FROM graphile_worker._private_jobs WHERE key = ?', [ticket]);
  expect(job).toEqual({ due: true, locked: false });

  await completesOnNextCore(ticket);
}, 60_000);
