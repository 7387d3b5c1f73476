// A minimal ABC agent, built on the TypeScript SDK (sdk/typescript): it streams the reply word by word.
// With `tool: NAME` in the message it first calls that tool through ABC (invoke, then wait).
//   PORT=9001 npx tsx examples/echo-agent/server.ts
import type { AddressInfo } from 'node:net';
import { createAgentServer, type RunContext } from '../../sdk/typescript/src/index.js';

const WORD_DELAY_MS = Number(process.env.WORD_DELAY_MS ?? 60);

async function reply(ctx: RunContext, signal: AbortSignal) {
  const input = ctx.body.input_message.content;
  ctx.state('thinking', { turns_so_far: ctx.body.messages.length });
  let text = `You said: ${input}`;
  const tool = /tool: ([\w.-]+)/.exec(input)?.[1];
  if (tool) text += ` | ${tool} gave ${JSON.stringify(await ctx.invokeTool(tool, { asked: input }))}`;
  const words = text.split(' ');
  for (const [i, word] of words.entries()) {
    if (signal.aborted) break;
    ctx.delta(i === 0 ? word : ` ${word}`);
    await new Promise((r) => setTimeout(r, WORD_DELAY_MS));
  }
  return { finalMessage: text, usage: { prompt_tokens: input.length, completion_tokens: words.length } };
}

export const createEchoAgent = () => createAgentServer(reply, { capabilities: ['streaming', 'tools'] });

if (import.meta.url === `file://${process.argv[1]}`) {
  const server = createEchoAgent().listen(Number(process.env.PORT ?? 9001), '127.0.0.1', () => {
    console.log(`echo agent on http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
}
