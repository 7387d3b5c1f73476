// The TypeScript SDK as a package: it builds with its own tsconfig into
// declarations and JavaScript that export what its README names.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const out = mkdtempSync(path.join(os.tmpdir(), 'abc-ts-sdk-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('@abc-platform/agent-sdk', () => {
  it('builds to typed JavaScript that exports the server, the context and the tool error', async () => {
    const pkg = JSON.parse(readFileSync('sdk/typescript/package.json', 'utf8'));
    expect(pkg.exports['.']).toEqual({ types: './dist/index.d.ts', default: './dist/index.js' });
    execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'sdk/typescript/tsconfig.build.json', '--outDir', out], { stdio: 'pipe' });
    const types = readFileSync(path.join(out, 'index.d.ts'), 'utf8');
    for (const name of ['createAgentServer', 'RunContext', 'ToolError', 'InvokeBody', 'ResumeInfo', 'AgentHandler']) expect(types).toContain(name);
    const built = await import(pathToFileURL(path.join(out, 'index.js')).href);
    expect(Object.keys(built).sort()).toEqual(['RunContext', 'ToolError', 'createAgentServer']);
  }, 60_000);
});
