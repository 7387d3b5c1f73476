// Loads the business packs: each `<dir>/<name>/index.ts` (or .js) whose
// default export is an AssemblyPack. src/ never imports a pack by name.
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { AssemblyPack } from '../ports/pack.js';

export async function loadPacks(dir: string): Promise<AssemblyPack[]> {
  if (!existsSync(dir)) return [];
  const packs: AssemblyPack[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).sort((a, b) => a.name.localeCompare(b.name))) {
    const file = ['index.ts', 'index.js'].map((f) => path.join(dir, entry.name, f)).find(existsSync);
    if (!file) continue;
    const pack = ((await import(pathToFileURL(file).href)) as { default?: AssemblyPack }).default;
    if (!pack?.name || typeof pack.units !== 'object') throw new Error(`${file} does not export an assembly pack as its default`);
    packs.push(pack);
  }
  return packs;
}
