// ABC grows without editing its planes: a pack teaches it a new kind of tool,
// and a contract and its assembly registered at runtime use that tool and a
// built-in unit, with a declarative output. Nothing here is compiled into src/.
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { invalidRequest } from '../../src/domain/errors.js';
import type { AssemblyPack } from '../../src/ports/pack.js';
import type { ToolKindAdapter } from '../../src/ports/tool-kind.js';
import { PACKS } from '../support/core.js';
import { startTestStack, type TestStack } from '../support/gateway.js';

/** A kind of tool that upper-cases one argument, named by the tool's metadata. */
const upper: ToolKindAdapter = {
  kind: 'upper',
  clientSide: false,
  validate(tool) {
    if (typeof tool.metadata?.field !== 'string') throw invalidRequest('an upper tool names metadata.field', 'metadata');
  },
  async run({ tool, args }) {
    return { text: String(args[tool.metadata!.field as string] ?? '').toUpperCase() };
  },
};
const shouting: AssemblyPack = { name: 'shouting', units: {}, toolKinds: [upper] };

let s: TestStack;

beforeAll(async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'abc-ext-'));
  const toolsFile = path.join(dir, 'tools.json');
  await writeFile(toolsFile, JSON.stringify([{ name: 'shout', kind: 'upper', metadata: { field: 'text' }, output_schema: { type: 'object', required: ['text'] } }]));
  s = await startTestStack({ packs: [...PACKS, shouting], toolsFile, contracts: { workers: 1 } });
});
afterAll(async () => {
  await s?.close();
});

const CONTRACT = { contract_id: 'com.example:shout', version: '1.0.0' };
const base = 'https://schemas.example.com/shout/1.0.0';

it('runs a contract registered at runtime on a tool kind a pack brought', async () => {
  const contract = await s.http('/v1/contracts', {
    method: 'POST',
    json: {
      ...CONTRACT,
      intent: 'shout',
      schemas: {
        request: {
          $id: `${base}/request.schema.json`,
          type: 'object',
          required: ['contract', 'intent', 'correlation', 'input'],
          properties: {
            contract: { type: 'object' },
            intent: { const: 'shout' },
            correlation: { type: 'object', required: ['request_id', 'idempotency_key', 'session_id'] },
            input: { type: 'object', required: ['text'], properties: { text: { type: 'string' } } },
            output_spec: { type: 'object' },
            execution_preferences: { type: 'object' },
          },
        },
        result: { $id: `${base}/result.schema.json`, type: 'object', required: ['loud', 'words'], additionalProperties: false, properties: { loud: { type: 'string' }, words: { type: 'integer' } } },
      },
    },
  });
  expect(contract.status, JSON.stringify(await contract.clone().json())).toBe(201);

  const assembly = await s.http('/v1/assemblies', {
    method: 'POST',
    json: {
      assembly_id: 'shout',
      version: '1.0.0',
      intent: 'shout',
      contract: CONTRACT,
      capabilities: [
        { name: 'tool.shout', kind: 'TOOL' },
        { name: 'text.stats', kind: 'TOOL' },
      ],
      steps: [
        { id: 'shout', tool_name: 'tool.shout', input: { text: '$.input.text' } },
        { id: 'count', tool_name: 'text.stats', input: { text: '$steps/shout/text' }, dependencies: ['shout'] },
      ],
      output: { result: { '/loud': '/shout/text', '/words': '/count/words' }, markdown: '**{{/loud}}** ({{/words}} words)' },
    },
  });
  expect(assembly.status, JSON.stringify(await assembly.clone().json())).toBe(201);
  expect((await assembly.json()).assembly.output.markdown).toBe('**{{/loud}}** ({{/words}} words)');

  const id = randomUUID();
  const submit = await s.http('/v1/contracts:submit', {
    method: 'POST',
    json: {
      contract: CONTRACT,
      intent: 'shout',
      correlation: { request_id: `r-${id}`, idempotency_key: `i-${id}`, session_id: 'session-shout' },
      input: { text: 'hello there' },
      output_spec: { format: 'markdown' },
      execution_preferences: { mode: 'sync', max_latency_ms: 20_000 },
    },
  });
  const body = await submit.json();
  expect(submit.status, JSON.stringify(body)).toBe(200);
  expect(body.result).toEqual({ loud: 'HELLO THERE', words: 2 });
  const artifact = await s.http(`/v1/tickets/${submit.headers.get('x-abc-ticket')}/artifact`);
  expect(await artifact.text()).toBe('**HELLO THERE** (2 words)');
});

it('refuses an assembly whose output names no step, and a template that does not close', async () => {
  const bad = (output: Record<string, unknown>) =>
    s.http('/v1/assemblies', {
      method: 'POST',
      json: { assembly_id: 'shout-bad', version: '1.0.0', intent: 'shout', capabilities: [{ name: 'tool.shout', kind: 'TOOL' }], steps: [{ id: 'shout', tool_name: 'tool.shout' }], output },
    });
  const unknownStep = await bad({ result: { '/x': '/nowhere/text' } });
  expect(unknownStep.status).toBe(400);
  expect((await unknownStep.json()).error).toMatchObject({ code: 'INVALID_ASSEMBLY', details: { pointer: '/assembly/output/result/~1x' } });
  const unclosed = await bad({ result: { '/x': '/shout/text' }, markdown: '{{#each /x}}' });
  expect(unclosed.status).toBe(400);
  expect((await unclosed.json()).error.message).toContain('never closed');
});
