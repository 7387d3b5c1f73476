// The error-code catalogue is closed: every code src/ and the gateway raise is
// in it, each is documented in docs/errors.md, and none exists in two cases.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/domain/error-codes.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const sources = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? sources(full) : full.endsWith('.ts') ? [full] : [];
  });

/** Code literals as ABC writes them: `code: '…'`, structuredError('…'), ToolFailure('…'), IM error frames. */
const PATTERNS = [/\bcode: '([A-Za-z0-9_]+)'/g, /structuredError\('([A-Za-z0-9_]+)'/g, /ToolFailure\('([a-z0-9_]+)'/g, /imError\('([a-z0-9_]+)'/g];

function raised(): Map<string, string> {
  const out = new Map<string, string>();
  for (const file of [...sources(path.join(ROOT, 'src')), ...sources(path.join(ROOT, 'gateway'))]) {
    if (file.endsWith('error-codes.ts')) continue;
    const text = readFileSync(file, 'utf8');
    for (const p of PATTERNS) for (const m of text.matchAll(p)) out.set(m[1]!, path.relative(ROOT, file));
  }
  return out;
}

describe('error codes', () => {
  it('every code raised in src/ and gateway/ is in the catalogue', () => {
    const unknown = [...raised()].filter(([code]) => !Object.hasOwn(ERROR_CODES, code)).map(([code, file]) => `${code} (${file})`);
    expect(unknown).toEqual([]);
  });

  it('no code exists in two cases', () => {
    const lower = Object.keys(ERROR_CODES).map((c) => c.toLowerCase());
    expect(lower.filter((c, i) => lower.indexOf(c) !== i)).toEqual([]);
  });

  it('every code in the catalogue is documented in docs/errors.md', () => {
    const doc = readFileSync(path.join(ROOT, 'docs/errors.md'), 'utf8');
    const missing = Object.keys(ERROR_CODES).filter((code) => !doc.includes(`\`${code}\``));
    expect(missing).toEqual([]);
  });
});
