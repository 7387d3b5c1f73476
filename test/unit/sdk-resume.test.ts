// The example SDK on a resumed invoke: a handler that streams its whole answer
// again sends only what its user does not have yet.
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentServer } from '../../sdk/typescript/src/index.js';

const server = createAgentServer(async (ctx) => {
  for (const word of ['one ', 'two ', 'three ', 'four']) ctx.delta(word);
  return { finalMessage: 'one two three four' };
});
let url: string;
beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server.close());

async function deltas(context: Record<string, unknown>): Promise<string[]> {
  const res = await fetch(`${url}/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-run-id': 'run_1', 'x-session-id': 's', 'x-platform-base-url': 'http://abc', 'x-abc-run-token': 't' },
    body: JSON.stringify({ agent_id: 'a', session_id: 's', run_id: 'run_1', input_message: { role: 'user', content: 'count' }, messages: [], context }),
  });
  const text = await res.text();
  return [...text.matchAll(/event: delta\ndata: (.*)\n/g)].map((m) => JSON.parse(m[1]!).text as string);
}

describe('the SDK on a resume', () => {
  it('streams everything on a first invoke', async () => {
    expect(await deltas({})).toEqual(['one ', 'two ', 'three ', 'four']);
  });

  it('sends only what follows the delivered text, even when it ends inside a delta', async () => {
    const resume = (streamed_text: string) => ({ resume: { reason: 'executor_lost', streamed_text, streamed_chars: streamed_text.length, last_cursor: '9', tool_calls: [] } });
    expect(await deltas(resume('one two '))).toEqual(['three ', 'four']);
    expect(await deltas(resume('one tw'))).toEqual(['o ', 'three ', 'four']);
    expect(await deltas(resume('one two three four'))).toEqual([]);
  });
});
