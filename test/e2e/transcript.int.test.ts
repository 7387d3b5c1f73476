// An agent receives the session's transcript up to AGENT_TRANSCRIPT_LIMIT messages, and is told when it was cut.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startFakeAgent, type FakeAgent } from '../support/fake-agent.js';
import { startTestStack, WsClient, type TestStack } from '../support/gateway.js';

let s: TestStack;
let agent: FakeAgent;
beforeAll(async () => {
  s = await startTestStack({ agentTranscriptLimit: 3 });
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
