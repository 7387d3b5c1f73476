// CPU time from Linux's /proc, for benches that split a unit's cost by thread
// and by process: a process's threads grouped by role, and PostgreSQL's
// processes on this machine.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';

/** The thread groups a Node process's CPU is split into. */
export const THREAD_GROUPS = ['main thread', 'gateway thread', "V8's helper threads", 'other threads'] as const;
export type ThreadGroup = (typeof THREAD_GROUPS)[number];

export const procAvailable = () => existsSync('/proc/self/task');

const TICK_MS = 1000 / (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** User and system time of a process or thread (`/proc/PID[/task/TID]`), in ms; 0 once it is gone. */
function cpuMs(dir: string): number {
  try {
    // The fields after the command name (in parentheses, and it may hold any): utime and stime are the 12th and 13th.
    const stat = readFileSync(`${dir}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return 0;
  }
}

const read = (file: string) => {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return '';
  }
};

/** What a thread of a Node process does, by its id and name: ABC's gateway and a floor's worker are worker threads. */
function groupOf(pid: number, tid: string): ThreadGroup {
  if (tid === String(pid)) return 'main thread';
  const name = read(`/proc/${pid}/task/${tid}/comm`);
  if (name === 'abc-gateway' || name === 'WorkerThread') return 'gateway thread';
  if (name.startsWith('V8')) return "V8's helper threads";
  return 'other threads';
}

/** A process's CPU so far, by thread group, in ms. */
export function threadsCpu(pid: number): Record<ThreadGroup, number> {
  const out = Object.fromEntries(THREAD_GROUPS.map((g) => [g, 0])) as Record<ThreadGroup, number>;
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) out[groupOf(pid, tid)] += cpuMs(`/proc/${pid}/task/${tid}`);
  return out;
}

/** CPU so far of each PostgreSQL process on this machine, by pid, in ms. */
export function postgresCpu(): Map<string, number> {
  const out = new Map<string, number>();
  for (const pid of readdirSync('/proc')) {
    if (/^\d+$/.test(pid) && read(`/proc/${pid}/comm`) === 'postgres') out.set(pid, cpuMs(`/proc/${pid}`));
  }
  return out;
}

/** PostgreSQL's CPU since `before`: processes started since count whole, those gone since lose their last stretch. */
export function postgresCpuSince(before: Map<string, number>): number {
  let total = 0;
  for (const [pid, ms] of postgresCpu()) total += ms - (before.get(pid) ?? 0);
  return total;
}
