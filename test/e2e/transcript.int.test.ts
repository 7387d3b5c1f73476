// An agent receives the session's transcript up to AGENT_TRANSCRIPT_LIMIT messages, and its
// consequence views up to AGENT_CONSEQUENCES_LIMIT, and is told when either was cut.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';

let s: TestStack;
let agent: FakeAgent;
beforeAll(async () => {
  s = await startTestStack({ agentTranscriptLimit: 3, agentConsequencesLimit: 2 });
  agent = await startFakeAgent();
  await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: 'echo', name: 'Echo', endpoint: agent.url } });
});
afterAll(async () => {
  await agent.close();
  await s.close();
});

it('sends the latest messages, oldest first, and says when the transcript was cut', async () => {
  const ws = await new WsClient(s.url).open();
  ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
  for (const [i, text] of ['one', 'two'].entries()) {
    ws.send({ type: 'agent_invoke', session_id: 'sess_transcript', agent_id: 'echo', message: { role: 'user', content: text } });
    await ws.until((f) => f.filter((x) => x.type === 'done').length === i + 1);
  }
  // Before the second run, 1 + 2 messages (user, assistant, user): the whole transcript.
  expect(agent.invocations[1]!.body.messages.map((m: { content: string }) => m.content)).toEqual(['one', 'echo: one', 'two']);
  expect(agent.invocations[1]!.body.context.transcript_truncated).toBeUndefined();
  ws.send({ type: 'agent_invoke', session_id: 'sess_transcript', agent_id: 'echo', message: { role: 'user', content: 'three' } });
  await ws.until((f) => f.filter((x) => x.type === 'done').length === 3);
  const third = agent.invocations[2]!.body;
  expect(third.messages.map((m: { content: string }) => m.content)).toEqual(['two', 'echo: two', 'three']);
  expect(third.context.transcript_truncated).toMatchObject({ sent_messages: 3, limit: 3, oldest_message_id: expect.stringMatching(/^msg_/) });
  ws.close();
});

it("sends the consequences of the session's latest actions, oldest first, and says when they were cut", async () => {
  const ws = await new WsClient(s.url).open();
  ws.send({ type: 'hello', api_key: s.key, user_id: 'u1' });
  const invoke = async (content: string) => {
    const done = ws.frames.filter((x) => x.type === 'done').length;
    ws.send({ type: 'agent_invoke', session_id: 'sess_consequences', agent_id: 'echo', message: { role: 'user', content } });
    await ws.until((f) => f.filter((x) => x.type === 'done').length === done + 1);
    return agent.invocations.at(-1)!.body.context.execution_consequences as { views: { action_summary: string }[]; prompt_text: string; truncated?: unknown };
  };
  await invoke('one');
  // Three finished actions of the session, a minute apart.
  await s.orm.em.fork().execute(
    `INSERT INTO execution_contracts (execution_id, tenant_id, session_id, action_type, action_summary, status, created_at, entered_at)
     SELECT 'exec_cut_' || i, tenant_id, session_id, 'tool_call', 'action ' || i, 'completed', now() - (4 - i) * interval '1 minute', now()
     FROM sessions, generate_series(1, 3) i WHERE session_id = 'sess_consequences'`,
  );
  const told = await invoke('two');
  expect(told.views.map((v) => v.action_summary)).toEqual(['action 2', 'action 3']);
  expect(told.prompt_text).toContain('action 3');
  expect(told.prompt_text).not.toContain('action 1');
  expect(told.truncated).toEqual({ sent_views: 2, limit: 2 });
  ws.close();
});
