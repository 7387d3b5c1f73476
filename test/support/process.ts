// `abc` as a real child process, and what tests look for in its output and on the machine.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '../..');
const ABC = path.join(ROOT, 'bin/abc.js');

export function run(args: string[], env: Record<string, string>, asUser?: string): ChildProcess {
  const { DATABASE_URL: _omit, ...base } = process.env;
  const command = asUser ? ['runuser', ['-u', asUser, '--', process.execPath, ABC, ...args]] as const : [process.execPath, [ABC, ...args]] as const;
  return spawn(command[0], command[1], { cwd: ROOT, env: { ...base, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Resolves with the first JSON log line matching `msg`. */
export function waitForLog(child: ChildProcess, msg: string, timeoutMs = 60_000): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let buffer = '';
    const timer = setTimeout(() => reject(new Error(`no "${msg}" log within ${timeoutMs} ms:\n${buffer}`)), timeoutMs);
    child.stdout!.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      // Only whole lines: a chunk may end in the middle of one.
      for (const line of buffer.split('\n').slice(0, -1)) {
        if (!line.startsWith('{')) continue;
        const entry = JSON.parse(line) as Record<string, unknown>;
        if (entry.msg === msg) {
          clearTimeout(timer);
          resolve(entry);
        }
      }
    });
    child.on('exit', (code) => reject(new Error(`exited with ${code} before "${msg}":\n${buffer}`)));
  });
}

export const exited = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.on('exit', (code) => resolve(code))));

export const postgresProcesses = (dataDir: string) => {
  try {
    return execFileSync('pgrep', ['-f', `postgres -D ${dataDir}`]).toString().trim().split('\n').filter(Boolean);
  } catch {
    return [];
  }
};


/** `abc core` as a child process with `env` (on top of this process's); resolves once it has booted (its tools registered). */
export async function startCoreProcess(env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, [ABC, 'core'], { cwd: ROOT, env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    let buffer = '';
    child.stdout!.on('data', (c: Buffer) => {
      buffer += c.toString();
      if (buffer.includes('"tools registered"')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`abc core exited with ${code}`)));
  });
  return child;
}
