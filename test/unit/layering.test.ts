// Imports point one way: the gateway speaks gRPC and never reaches into src/;
// domain/ is pure and imports nothing with I/O.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? sources(full) : full.endsWith('.ts') ? [full] : [];
  });
}

const imports = (file: string) =>
  [...readFileSync(file, 'utf8').matchAll(/^\s*(?:import|export)[^'"]*from\s+'([^']+)'/gm)].map((m) => m[1]!);

describe('layering', () => {
  it('gateway/ imports gen/ and packages, never src/', () => {
    const offenders = sources(path.join(ROOT, 'gateway')).flatMap((file) =>
      imports(file)
        .filter((spec) => spec.startsWith('.') && path.resolve(path.dirname(file), spec).startsWith(path.join(ROOT, 'src')))
        .map((spec) => `${path.relative(ROOT, file)} -> ${spec}`),
    );
    expect(offenders).toEqual([]);
  });

  it('src/domain/ is pure: no gen/, store, ORM, network or filesystem', () => {
    const banned = /^(node:(fs|net|http|https|child_process|dgram|dns|tls)|fs|pg|@mikro-orm\/|@grpc\/|fastify|ws)/;
    const offenders = sources(path.join(ROOT, 'src/domain')).flatMap((file) =>
      imports(file)
        .filter((spec) => banned.test(spec) || (spec.startsWith('.') && !path.resolve(path.dirname(file), spec).startsWith(path.join(ROOT, 'src/domain'))))
        .map((spec) => `${path.relative(ROOT, file)} -> ${spec}`),
    );
    expect(offenders).toEqual([]);
  });

  it('src/execution/ (tools) never reaches the engine, its agents or its policy (seed 002 dependency rule)', () => {
    const banned = ['src/engine', 'src/decision', 'src/domain/engine-policy.ts'].map((d) => path.join(ROOT, d));
    const offenders = sources(path.join(ROOT, 'src/execution')).flatMap((file) =>
      imports(file)
        .filter((spec) => spec.startsWith('.') && banned.some((b) => path.resolve(path.dirname(file), spec).replace(/\.js$/, '.ts').startsWith(b)))
        .map((spec) => `${path.relative(ROOT, file)} -> ${spec}`),
    );
    expect(offenders).toEqual([]);
  });
});
