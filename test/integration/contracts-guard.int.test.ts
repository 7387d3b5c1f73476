// A response that would break its contract schema is never sent: it is logged
// and answered as INTERNAL. (The poll schema here demands what ABC never produces.)
import { SubmitContractRequest } from '../../gen/abc/ingress/v1/ingress.js';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ErrorMessage } from '../support/error-message.js';
import { PACKS, startTestCore, type TestCore } from '../support/core.js';
import { failure, unary, withKey } from '../support/grpc.js';
import { request } from '../support/contracts.js';

let dir: string;
let core: TestCore;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'abc-guard-'));
  const folder = path.join(dir, 'com.thaleon.wm/analyze-portfolio/1.0.0');
  await cp(path.resolve('packs/analyze-portfolio/contracts/com.thaleon.wm/analyze-portfolio/1.0.0'), folder, { recursive: true });
  const file = path.join(folder, 'poll-response.schema.json');
  const schema = JSON.parse(await readFile(file, 'utf8'));
  schema.properties.ttl_seconds.minimum = 1_000_000_000;
  await writeFile(file, JSON.stringify(schema));
  // The pack's contract is replaced by the broken copy.
  core = await startTestCore({ packs: PACKS.map((p) => ({ ...p, contractsDir: dir })), contracts: { workers: 0 } });
});
afterAll(async () => {
  await core?.close();
  await rm(dir, { recursive: true, force: true });
});

it('answers INTERNAL instead of a poll response that breaks its schema', async () => {
  const ingress = core.clients.ingress;
  const submitted = await unary(ingress.submitContract.bind(ingress), SubmitContractRequest.fromPartial({ body: request() }), withKey(core.key));
  const error = await failure(unary(ingress.pollTicket.bind(ingress), { ticket: submitted.ticket, waitMs: 0, noWait: true }, withKey(core.key)));
  expect(error.code).toBe(13);
  expect(ErrorMessage(error)).toMatchObject({ code: 'RESPONSE_SCHEMA_VIOLATION', category: 'ERROR_CATEGORY_INTERNAL', retryable: false });
  expect(ErrorMessage(error).traceId).toMatch(/^[0-9a-f]{32}$/);
});
