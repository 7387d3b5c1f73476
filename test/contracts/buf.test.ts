// The contracts are guarded: lint and format are clean, and `buf breaking`
// against the committed baseline accepts additions and refuses deletions.
import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const BUF = path.join(ROOT, 'node_modules/.bin/buf');
const BASELINE = path.join(ROOT, 'proto-baseline/abc-v1.json');

async function buf(args: string[], cwd = ROOT): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(BUF, args, { cwd });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, output: e.stdout + e.stderr };
  }
}

/** A copy of the contracts in a temporary module, edited by `edit`. */
async function editedCopy(file: string, edit: (text: string) => string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'abc-proto-'));
  await cp(path.join(ROOT, 'proto'), path.join(dir, 'proto'), { recursive: true });
  await cp(path.join(ROOT, 'buf.yaml'), path.join(dir, 'buf.yaml'));
  const target = path.join(dir, 'proto', file);
  await writeFile(target, edit(await readFile(target, 'utf8')));
  return dir;
}

describe('contracts', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
  });

  it('pass buf lint and buf format', async () => {
    expect(await buf(['lint'])).toEqual({ code: 0, output: '' });
    expect(await buf(['format', '--diff', '--exit-code'])).toEqual({ code: 0, output: '' });
  });

  it('match the committed baseline', async () => {
    expect(await buf(['breaking', '--against', BASELINE])).toEqual({ code: 0, output: '' });
  });

  it('accept an additive change', async () => {
    const dir = await editedCopy('abc/orchestrator/v1/tool.proto', (text) =>
      text.replace('  int64 deadline_ts = 12;\n}', '  int64 deadline_ts = 12;\n  string note = 13;\n}'),
    );
    dirs.push(dir);
    expect(await buf(['breaking', '--against', BASELINE], dir)).toEqual({ code: 0, output: '' });
  });

  it('refuse a deleted field', async () => {
    const dir = await editedCopy('abc/orchestrator/v1/tool.proto', (text) => {
      expect(text).toContain('  string tool_name = 3;\n  ToolKind kind = 4;');
      return text.replace('  string tool_name = 3;\n  ToolKind kind = 4;', '  ToolKind kind = 4;');
    });
    dirs.push(dir);
    const result = await buf(['breaking', '--against', BASELINE], dir);
    expect(result.code).not.toBe(0);
    expect(result.output).toMatch(/Previously present field "3" with name "tool_name" on message "ToolCall" was deleted/);
  });
});
