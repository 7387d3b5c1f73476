// One PostgreSQL for the whole run: DATABASE_URL when given, else an embedded cluster.
// Each test file creates its own database from it (see support/db.ts).
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { createLogger } from '../../src/runtime/log.js';
import { startEmbeddedPostgres } from '../../src/store/embedded-pg.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
  }
}

export default async function setup(project: TestProject) {
  if (process.env.DATABASE_URL) {
    project.provide('pgAdminUrl', process.env.DATABASE_URL);
    return;
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'abc-test-pg-'));
  const cluster = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), logger: createLogger('warn'), ephemeral: true });
  project.provide('pgAdminUrl', cluster.adminUrl);
  return async () => {
    await cluster.stop();
    await rm(dir, { recursive: true, force: true });
  };
}
