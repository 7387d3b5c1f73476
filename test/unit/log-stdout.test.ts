// ABC's logs go to stdout in batches and are flushed when the process exits.
// A reader of stdout that went away (a log shipper that died, a closed pipe)
// must not keep the process from exiting.
import { fork } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/process.js';

describe('logs to stdout', () => {
  it('do not hold up the exit when the reader of stdout has gone', async () => {
    const child = fork(path.join(ROOT, 'test/fixtures/log/log-then-exit.ts'), [], {
      cwd: ROOT,
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await new Promise((resolve) => child.once('message', resolve));
      // The read end closes: the child's next write to stdout fails with EPIPE.
      child.stdout!.destroy();
      child.send('exit');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }, 20_000);
});
