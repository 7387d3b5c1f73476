// The declarative output's pieces: JSON pointers and the artifact template.
import { describe, expect, it } from 'vitest';
import { getPointer, setPointer } from '../../src/domain/pointer.js';
import { parseTemplate, renderTemplate } from '../../src/domain/template.js';
import { declarativeOutput } from '../../src/engine/outputs.js';

describe('JSON pointers', () => {
  it('reads and writes through escaped tokens, and misses cleanly', () => {
    const doc: Record<string, unknown> = { 'a/b': { '~x': [10, 20] } };
    expect(getPointer(doc, '/a~1b/~0x/1')).toBe(20);
    expect(getPointer(doc, '/a~1b/nope/0')).toBeUndefined();
    setPointer(doc, '/new/deep/key', 1);
    expect(doc.new).toEqual({ deep: { key: 1 } });
    expect(() => getPointer(doc, 'no-slash')).toThrow(/not a JSON pointer/);
  });
});

describe('templates', () => {
  const doc = { title: 'T', items: [{ n: 1 }, { n: 2 }], tags: ['x', 'y'], empty: [], stats: { words: 3 } };
  it('fills values, loops and conditions', () => {
    expect(renderTemplate('# {{/title}} ({{ /stats/words }}){{#each /items}} [{{./n}}]{{/each}}{{#each /tags}}-{{.}}{{/each}}', doc)).toBe('# T (3) [1] [2]-x-y');
    expect(renderTemplate('{{#if /empty}}no{{/if}}{{#if /title}}yes{{/if}}{{/missing}}', doc)).toBe('yes');
    expect(renderTemplate('{{/stats}}', doc)).toBe('{"words":3}');
  });
  it('refuses unbalanced blocks before rendering', () => {
    expect(() => parseTemplate('{{#each /items}}x')).toThrow(/never closed/);
    expect(() => parseTemplate('x{{/if}}')).toThrow(/closes no open block/);
  });
});

describe('the declarative output', () => {
  const out = declarativeOutput({ result: { '/title': '/fetch/title', '/id': '$request/input/id', '/gone': '/nostep/x' }, partial: { '/title': '/fetch/title' }, markdown: '# {{/title}}' });
  it('maps step outputs and the request into the result; absent sources leave the key out', () => {
    expect(out.aggregate({ input: { id: 'd1' } }, { fetch: { title: 'T' } })).toEqual({ result: { title: 'T', id: 'd1' }, warnings: [] });
    expect(out.partialResult({}, {})).toBeNull();
  });
  it('renders markdown only when the request asks for it', () => {
    expect(out.render({ output_spec: { format: 'markdown' } }, { title: 'T' }, {})).toEqual({ content: '# T', mediaType: 'text/markdown; charset=utf-8' });
    expect(out.render({ output_spec: { format: 'json' } }, { title: 'T' }, {})).toEqual({ content: '{"title":"T"}', mediaType: 'application/json' });
  });
});

describe('assembly outputs', () => {
  it('refuses two packs owning one assembly', async () => {
    const { AssemblyOutputs } = await import('../../src/engine/outputs.js');
    const output = declarativeOutput(undefined);
    const pack = (name: string) => ({ name, units: {}, outputs: { same: output } });
    expect(() => new AssemblyOutputs([pack('a'), pack('b')])).toThrow(/owned by two packs/);
  });
});
