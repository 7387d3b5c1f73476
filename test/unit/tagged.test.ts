// Tagged payloads: withheld from live deltas however the stream is cut,
// extracted from the full text, malformed bodies dropped and noted.
import { describe, expect, it } from 'vitest';
import { extractPayloads, mergePatch, TagFilter } from '../../src/domain/tagged.js';

const REPLY =
  'Here is your plan <AGENT_UI_JSON>{"type":"strategy_ref","payload":{"id":"s-1"}}</AGENT_UI_JSON>and a < b still shows.\n' +
  '<AGENT_STATE_PATCH>{"confirmed": true, "backtest": {"status": "completed"}}</AGENT_STATE_PATCH> Done <AGENDA> too.';
const VISIBLE = 'Here is your plan and a < b still shows.\n Done <AGENDA> too.';

/** Streams `text` through a filter in the given chunks. */
function stream(chunks: string[]): string {
  const f = new TagFilter();
  return chunks.map((c) => f.push(c)).join('') + f.end();
}

describe('the streaming tag filter', () => {
  it('withholds tagged segments when the stream is cut at every single character', () => {
    expect(stream([...REPLY])).toBe(VISIBLE);
  });

  it('withholds them for every cut into two chunks, and never shows part of a tag', () => {
    for (let i = 0; i <= REPLY.length; i++) {
      const f = new TagFilter();
      const first = f.push(REPLY.slice(0, i));
      expect(first).not.toMatch(/<AGENT_(UI|STA)/);
      expect(first + f.push(REPLY.slice(i)) + f.end()).toBe(VISIBLE);
    }
  });

  it('withholds them for random cuts', () => {
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 200; round++) {
      const chunks: string[] = [];
      for (let at = 0; at < REPLY.length; ) {
        const size = 1 + Math.floor(next() * 12);
        chunks.push(REPLY.slice(at, at + size));
        at += size;
      }
      expect(stream(chunks)).toBe(VISIBLE);
    }
  });

  it('shows held text that never became a tag, and withholds a segment left open', () => {
    expect(stream(['total < ', '10'])).toBe('total < 10');
    expect(stream(['ends with <AGENT_'])).toBe('ends with <AGENT_');
    expect(stream(['before <AGENT_STATE_PATCH>{"x":', '1'])).toBe('before ');
  });
});

describe('payload extraction', () => {
  it('parses every payload in order and removes the tags from the text', () => {
    const out = extractPayloads(REPLY + '<AGENT_UI_JSON>{"type":"backtest_charts"}</AGENT_UI_JSON>');
    expect(out.genui).toEqual([{ type: 'strategy_ref', payload: { id: 's-1' } }, { type: 'backtest_charts' }]);
    expect(out.patches).toEqual([{ confirmed: true, backtest: { status: 'completed' } }]);
    expect(out.text).toBe('Here is your plan and a < b still shows.\n Done <AGENDA> too.');
    expect(out.dropped).toEqual([]);
  });

  it('drops a malformed body, an array and an unclosed tag, and says why', () => {
    const out = extractPayloads('a<AGENT_STATE_PATCH>{"risk": }</AGENT_STATE_PATCH>b<AGENT_UI_JSON>[1]</AGENT_UI_JSON>c<AGENT_UI_JSON>{"type":"x"');
    expect(out.text).toBe('abc');
    expect(out.patches).toEqual([]);
    expect(out.genui).toEqual([]);
    expect(out.dropped.map((d) => [d.tag, d.reason.split(':')[0]])).toEqual([
      ['AGENT_STATE_PATCH', 'not JSON'],
      ['AGENT_UI_JSON', 'not a JSON object'],
      ['AGENT_UI_JSON', 'the tag is never closed'],
    ]);
  });

  it('removes echoed session state and forged tool tags', () => {
    const out = extractPayloads('Sure.\n[SESSION STATE]\nphase: kyc\n[/SESSION STATE]\nNext <mcp_call name="x">{"a":1}</mcp_call>step<tool_result id="1"/>.');
    expect(out.text).toBe('Sure.\n\nNext step.');
  });
});

describe('state patches', () => {
  it('merge as a JSON Merge Patch: objects key by key, null deletes, arrays replace', () => {
    const state = { risk: 'low', backtest: { status: 'running', runs: [1] }, draft: 'x' };
    expect(mergePatch(state, { risk: 'high', backtest: { status: 'completed', runs: [2, 3] }, draft: null })).toEqual({ risk: 'high', backtest: { status: 'completed', runs: [2, 3] } });
    expect(state).toEqual({ risk: 'low', backtest: { status: 'running', runs: [1] }, draft: 'x' });
  });
});
