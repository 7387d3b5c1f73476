// `abc core` as a real child process, for crash tests: resolves once it listens.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { connectCore, type CoreClients } from '../../gateway/core-client.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

export async function startChildCore(env: Record<string, string>): Promise<{ child: ChildProcess; clients: CoreClients }> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/abc.js'), 'core'], {
    cwd: ROOT,
    env: { ...process.env, ABC_GRPC_ADDR: '127.0.0.1:0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const address = await new Promise<string>((resolve, reject) => {
    let buffer = '';
    const onData = (c: Buffer) => {
      buffer += c.toString();
      const line = buffer.split('\n').find((l) => l.includes('"core listening"'));
      if (!line) return;
      child.stdout!.off('data', onData);
      child.stdout!.on('data', (c: Buffer) => process.env.CHILD_LOG && process.stderr.write(c));
      child.stdout!.resume(); // keep draining, so logging never blocks the child
      resolve(JSON.parse(line).address);
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`abc core exited with ${code}`)));
  });
  return { child, clients: connectCore(address) };
}
