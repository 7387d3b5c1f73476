// A run held open by a fake agent (it streams one delta, then waits), invoked
// over the IM WebSocket, so tests can act with the run's token while it lives.
import type { FakeAgent, Invocation } from './fake-agent.js';
import { sse } from './fake-agent.js';
import { WsClient, type TestStack } from './gateway.js';

export interface LiveRun {
  runId: string;
  sessionId: string;
  token: string;
  ws: WsClient;
  inv: Invocation;
  /** Lets the agent finish the run. */
  release: () => void;
}

/** `key` invokes it (the stack's admin key unless given), so the run is that key's tenant's. */
export async function liveRun(s: TestStack, agent: FakeAgent, opts: { agentId: string; userId?: string; content?: string; key?: string }): Promise<LiveRun> {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  agent.behave(async (inv, res) => {
    sse(res, 'delta', { text: 'working' });
    await Promise.race([held, inv.closed]);
    sse(res, 'done', { usage: {} });
    res.end();
  });
  const ws = await new WsClient(s.url).open();
  ws.send({ type: 'hello', api_key: opts.key ?? s.key, user_id: opts.userId ?? 'u1' });
  const sessionId = `sess_${opts.agentId}_${Date.now()}_${Math.random().toString(36).slice(2, 6)}`;
  ws.send({ type: 'agent_invoke', session_id: sessionId, agent_id: opts.agentId, message: { role: 'user', content: opts.content ?? 'go' } });
  const delta = await ws.next('delta');
  const inv = agent.invocations.at(-1)!;
  return { runId: delta.run_id, sessionId, token: String(inv.headers['x-abc-run-token']), ws, inv, release };
}
