// The shape of the code: a kernel (domain, ports, store, runtime), planes on it,
// composition roots on top, and packs beside it. Every rule here fails on a
// single offending import.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? sources(full) : full.endsWith('.ts') && !full.endsWith('.test.ts') ? [full] : [];
  });
}

const imports = (file: string) => [...readFileSync(file, 'utf8').matchAll(/^\s*(?:import|export)[^'"]*from\s+'([^']+)'/gm)].map((m) => m[1]!);

/** `src/<top>` of a relative import, or of the file itself; `gen` for generated code. */
const topOf = (abs: string) => (abs.startsWith(path.join(ROOT, 'gen')) ? 'gen' : path.relative(path.join(ROOT, 'src'), abs).split(path.sep)[0]!.replace(/\.js$/, '.ts'));
const resolved = (file: string, spec: string) => path.resolve(path.dirname(file), spec);

interface Edge {
  file: string;
  from: string;
  to: string;
  spec: string;
}

/** Every import between two folders of src/. */
function edges(): Edge[] {
  return sources(path.join(ROOT, 'src')).flatMap((file) =>
    imports(file)
      .filter((spec) => spec.startsWith('.'))
      .map((spec) => ({ file: path.relative(ROOT, file), from: topOf(file), to: topOf(resolved(file, spec)), spec }))
      .filter((e) => e.from !== e.to),
  );
}

const KERNEL = ['domain', 'ports', 'store', 'runtime'];
/** What each plane may use beyond the kernel: a plane's use cases, never a cycle. */
const PLANES: Record<string, string[]> = {
  access: [],
  grpc: ['access'],
  execution: [],
  decision: ['access', 'grpc'],
  engine: ['decision', 'execution', 'access'],
  contracts: ['engine', 'decision', 'access', 'grpc'],
  orchestrator: ['execution', 'access', 'grpc'],
  ingress: ['orchestrator', 'access', 'grpc'],
  observer: ['access', 'grpc'],
  workflow: ['orchestrator', 'execution', 'access', 'grpc'],
};
/** What the kernel's parts may use. */
const KERNEL_RULES: Record<string, string[]> = { domain: [], ports: ['domain'], runtime: ['domain', 'config.ts'], store: ['domain', 'ports', 'runtime', 'config.ts'] };

const offenders = (list: Edge[]) => list.map((e) => `${e.file} -> ${e.spec}`);

describe('layering', () => {
  it('src/ holds only the kernel, the planes and the composition root (main/), plus config.ts', () => {
    const tops = readdirSync(path.join(ROOT, 'src')).sort();
    expect(tops).toEqual([...KERNEL, ...Object.keys(PLANES), 'main', 'config.ts'].sort());
  });

  it('the kernel imports only what lies under it', () => {
    const bad = edges().filter((e) => e.from in KERNEL_RULES && !KERNEL_RULES[e.from]!.includes(e.to));
    expect(offenders(bad)).toEqual([]);
  });

  it('a plane imports the kernel, config and the planes its row names; nothing imports main/', () => {
    const bad = edges().filter((e) => {
      if (e.to === 'main') return e.from !== 'main';
      if (!(e.from in PLANES)) return false;
      return !KERNEL.includes(e.to) && e.to !== 'config.ts' && e.to !== 'gen' && !PLANES[e.from]!.includes(e.to);
    });
    expect(offenders(bad)).toEqual([]);
  });

  it('the planes form no cycle', () => {
    const seen = new Map<string, 'open' | 'done'>();
    const cycles: string[] = [];
    const visit = (plane: string, trail: string[]) => {
      if (seen.get(plane) === 'done') return;
      if (seen.get(plane) === 'open') return void cycles.push([...trail, plane].join(' -> '));
      seen.set(plane, 'open');
      for (const next of PLANES[plane] ?? []) visit(next, [...trail, plane]);
      seen.set(plane, 'done');
    };
    for (const plane of Object.keys(PLANES)) visit(plane, []);
    expect(cycles).toEqual([]);
  });

  it('config.ts imports the domain only', () => {
    const file = path.join(ROOT, 'src/config.ts');
    const bad = imports(file).filter((spec) => spec.startsWith('.') && topOf(resolved(file, spec)) !== 'domain');
    expect(bad).toEqual([]);
  });

  it('src/ never imports a pack, and packs import only the ports and the domain of src/', () => {
    const intoPacks = sources(path.join(ROOT, 'src')).flatMap((file) => imports(file).filter((spec) => spec.startsWith('.') && resolved(file, spec).startsWith(path.join(ROOT, 'packs'))).map((spec) => `${path.relative(ROOT, file)} -> ${spec}`));
    expect(intoPacks).toEqual([]);
    const fromPacks = sources(path.join(ROOT, 'packs')).flatMap((file) =>
      imports(file)
        .filter((spec) => {
          if (!spec.startsWith('.')) return false;
          const target = resolved(file, spec);
          if (!target.startsWith(path.join(ROOT, 'src'))) return !target.startsWith(path.dirname(file).split(path.sep).slice(0, path.join(ROOT, 'packs').split(path.sep).length + 1).join(path.sep));
          return !['ports', 'domain'].includes(topOf(target));
        })
        .map((spec) => `${path.relative(ROOT, file)} -> ${spec}`),
    );
    expect(fromPacks).toEqual([]);
  });

  it('no business lives in src/: nothing there names a portfolio', () => {
    const named = sources(path.join(ROOT, 'src')).filter((file) => /portfolio/i.test(readFileSync(file, 'utf8')));
    expect(named.map((f) => path.relative(ROOT, f))).toEqual([]);
  });

  it('gateway/ imports gen/ and packages, never src/', () => {
    const bad = sources(path.join(ROOT, 'gateway')).flatMap((file) =>
      imports(file)
        .filter((spec) => spec.startsWith('.') && resolved(file, spec).startsWith(path.join(ROOT, 'src')))
        .map((spec) => `${path.relative(ROOT, file)} -> ${spec}`),
    );
    expect(bad).toEqual([]);
  });

  it('src/domain/ is pure: no gen/, store, ORM, network or filesystem', () => {
    const banned = /^(node:(fs|net|http|https|child_process|dgram|dns|tls)|fs|pg|@mikro-orm\/|@grpc\/|fastify|ws|openai)/;
    const bad = sources(path.join(ROOT, 'src/domain')).flatMap((file) => imports(file).filter((spec) => banned.test(spec)).map((spec) => `${path.relative(ROOT, file)} -> ${spec}`));
    expect(bad).toEqual([]);
  });

  it('only src/store/ and the composition root reach the ORM package or pg directly, besides EntityManager types', () => {
    const bad = sources(path.join(ROOT, 'src')).flatMap((file) => {
      const top = topOf(file);
      if (top === 'store' || top === 'main') return [];
      return [...readFileSync(file, 'utf8').matchAll(/^\s*import\s+(type\s+)?[^'"]*from\s+'(pg|@mikro-orm\/[^']+)'/gm)].filter((m) => !m[1]).map((m) => `${path.relative(ROOT, file)} -> ${m[2]}`);
    });
    expect(bad).toEqual([]);
  });

  it('only src/store/ talks SQL: no statement and no execute or query call on a database handle elsewhere', () => {
    const sql = /\b(SELECT\s[\s\S]{0,200}?\bFROM|INSERT INTO|UPDATE\s+\w+\s+SET|DELETE FROM)\b|\b(em|tx|em\(\)|pool|readOnly)\.(execute|query)\b|\.execute<|\.query</;
    const bad = sources(path.join(ROOT, 'src')).filter((file) => topOf(file) !== 'store' && sql.test(readFileSync(file, 'utf8')));
    expect(bad.map((f) => path.relative(ROOT, f))).toEqual([]);
  });

  it('each table has one owner module in store/ that writes it (its machine binding included)', () => {
    const OWNERS: Record<string, string[]> = {
      runs: ['src/store/run-store.ts', /* seq allocation of the log */ 'src/store/event-log.ts'],
      tool_calls: ['src/store/tool-call-store.ts'],
      approvals: ['src/store/tool-call-store.ts'],
      idempotency_keys: ['src/store/tool-call-store.ts'],
      tickets: ['src/store/ticket-store.ts'],
      ticket_steps: ['src/store/ticket-store.ts'],
      execution_contracts: ['src/store/execution-contracts.ts'],
      execution_transitions: ['src/store/execution-contracts.ts'],
      memory: ['src/store/memory.ts', /* seed 004 execution facts */ 'src/store/execution-contracts.ts'],
      agents: ['src/store/agent-store.ts'],
      tools: ['src/store/tool-store.ts'],
      sessions: ['src/store/session-store.ts', /* the session's event head, bumped with each append */ 'src/store/event-log.ts'],
      assemblies: ['src/store/assembly-store.ts'],
      frozen_plans: ['src/store/assembly-store.ts'],
      snapshots: ['src/store/snapshot-store.ts'],
      contract_versions: ['src/store/contract-versions.ts'],
      token_usage: ['src/store/token-usage.ts'],
      policies: ['src/store/policies.ts'],
      workflows: ['src/store/workflow-store.ts'],
      workflow_sessions: ['src/store/workflow-sessions.ts'],
      phase_transitions: ['src/store/workflow-sessions.ts'],
    };
    const bad: string[] = [];
    for (const file of sources(path.join(ROOT, 'src'))) {
      const text = readFileSync(file, 'utf8');
      for (const [table, owners] of Object.entries(OWNERS)) {
        const writes = new RegExp(`(UPDATE|INSERT INTO|DELETE FROM) ${table}\\b|table: '${table}'`).test(text);
        if (writes && !owners.includes(path.relative(ROOT, file))) bad.push(`${path.relative(ROOT, file)} writes ${table}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('src/execution/ (tools) never reaches the engine, its agents or its policy (seed 002 dependency rule)', () => {
    const bad = edges().filter((e) => e.from === 'execution' && ['engine', 'decision'].includes(e.to));
    expect(offenders(bad)).toEqual([]);
    const policy = sources(path.join(ROOT, 'src/execution')).flatMap((file) => imports(file).filter((spec) => spec.endsWith('engine-policy.js')));
    expect(policy).toEqual([]);
  });
});
