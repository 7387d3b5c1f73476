// Sync submissions run in the submitting core up to its sync slots
// (ABC_CONTRACT_SYNC_EXECUTIONS), apart from its queue workers; more go
// through the queue, and every one answers with its result.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestStack, type TestStack } from '../support/gateway.js';
import { importSamplePortfolios, referenceAssembly, request } from '../support/contracts.js';
import { startToolServer, type ToolServer } from '../support/tool-server.js';

let s: TestStack;
let tools: ToolServer;

beforeAll(async () => {
  tools = await startToolServer();
  s = await startTestStack({ contracts: { workers: 1, syncExecutions: 2 } });
  await importSamplePortfolios(s.orm);
  const registered = await s.http('/v1/tools/register', { method: 'POST', json: { name: 'gate', kind: 'http', endpoint: tools.endpoint('gate'), timeout_ms: 30_000 } });
  expect(registered.status, await registered.clone().text()).toBe(200);
  // The reference plan with one more step, which waits at the gate.
  const a = referenceAssembly();
  a.version = '1.50.0';
  a.capabilities.push({ name: 'tool.gate', kind: 'TOOL' });
  a.steps.push({ id: 'gate', label: 'gate', tool_name: 'tool.gate', input: {}, dependencies: ['value_positions'] });
  const res = await s.http('/v1/assemblies', { method: 'POST', json: a });
  expect(res.status, await res.clone().text()).toBe(201);
});
afterAll(async () => {
  await s?.close();
  await tools?.close();
});

type Json = Record<string, any>;
const sync = (body = request({ execution_preferences: { mode: 'sync', max_latency_ms: 30_000 } })) =>
  s.http('/v1/contracts:submit', { method: 'POST', json: body }).then(async (res) => ({ status: res.status, body: (await res.json()) as Json }));
const owners = async (requests: Json[]) =>
  (
    await s.orm.em.fork().execute<{ ticket: string; lease_owner: string | null }[]>(
      "SELECT ticket, lease_owner FROM tickets WHERE request_id = ANY(ARRAY(SELECT jsonb_array_elements_text(?::jsonb))) ORDER BY ticket",
      [JSON.stringify(requests.map((r) => r.correlation.request_id))],
    )
  ).map((r) => (r.lease_owner === `now-${r.ticket}` ? 'here' : r.lease_owner ? 'queue' : 'none'));

it('runs as many sync submissions at once in the submitting core as it has sync slots, sends the rest through the queue, and frees each slot', async () => {
  tools.script('gate', { hold: true, body: { open: true } });
  const first = Array.from({ length: 3 }, () => request({ execution_preferences: { mode: 'sync', max_latency_ms: 30_000 } }));
  const answers = first.map((body) => sync(body));
  // Two run here; the third waits in the queue for the one worker, which takes it.
  await expect.poll(() => tools.held('gate'), { timeout: 15_000 }).toBe(3);
  expect((await owners(first)).sort()).toEqual(['here', 'here', 'queue']);
  tools.release('gate');
  for (const answer of await Promise.all(answers)) expect(answer).toMatchObject({ status: 200, body: { kind: 'result' } });

  // A replay of a finished submission takes a slot for a moment and gives it back.
  tools.script('gate', { hold: true, body: { open: true } });
  expect(await sync(first[0])).toMatchObject({ status: 200, body: { kind: 'result' } });
  const second = Array.from({ length: 2 }, () => request({ execution_preferences: { mode: 'sync', max_latency_ms: 30_000 } }));
  const more = second.map((body) => sync(body));
  await expect.poll(() => tools.held('gate'), { timeout: 15_000 }).toBe(2);
  expect(await owners(second)).toEqual(['here', 'here']);
  tools.release('gate');
  for (const answer of await Promise.all(more)) expect(answer).toMatchObject({ status: 200, body: { kind: 'result' } });
});
