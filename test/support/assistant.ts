// An agent written with the example SDK, for end-to-end tests: it calls the
// LLM through the proxy, calls the `bank.transfer` tool (and waits through
// its approval), then asks the `echo` agent, and answers with all three.
import type http from 'node:http';
import { createAgentServer } from '../../sdk/typescript/src/index.js';
import { createEchoAgent } from '../../examples/echo-agent/server.js';
import type { TestStack } from './gateway.js';

/** Registers `assistant` and `echo` with the stack, each served by `listen`. */
export async function registerAssistant(s: TestStack, listen: (server: http.Server) => Promise<string>): Promise<void> {
  const assistant = createAgentServer(async (ctx) => {
    const completion = await ctx.llm.chat.completions.create({ model: 'gpt-4', messages: [{ role: 'user', content: ctx.body.input_message.content }] });
    const receipt = await ctx.invokeTool('bank.transfer', { amount: 250, to: 'acct-7' });
    let child = '';
    for await (const e of ctx.invokeAgent('echo', 'confirm')) if (e.event === 'done') child = e.data.final_message;
    const text = `${completion.choices[0]!.message.content} / ${JSON.stringify(receipt)} / ${child}`;
    ctx.delta(text);
    return { finalMessage: text };
  });
  for (const [id, server] of [['assistant', assistant], ['echo', createEchoAgent()]] as const) {
    await s.http('/v1/agents/register', { method: 'POST', json: { agent_id: id, name: id, endpoint: await listen(server) } });
  }
}
