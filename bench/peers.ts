// The peers ABC is measured against (DBOS, LangGraph, the Portkey gateway) live in
// bench/peers with their own package.json, so a user's `npm install` stays lean.
// The first bench that needs them installs them there.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

export const PEERS_DIR = fileURLToPath(new URL('./peers/', import.meta.url));
const manifest = path.join(PEERS_DIR, 'package.json');

let installed: Promise<void> | undefined;

/** Installs bench/peers once (npm ci when a lockfile exists). */
export function ensurePeers(): Promise<void> {
  return (installed ??= (async () => {
    const deps = Object.keys((createRequire(import.meta.url)(manifest) as { dependencies: Record<string, string> }).dependencies);
    if (deps.every((d) => existsSync(path.join(PEERS_DIR, 'node_modules', d, 'package.json')))) return;
    console.log('installing the bench peers into bench/peers (first use)…');
    const command = existsSync(path.join(PEERS_DIR, 'package-lock.json')) ? 'ci' : 'install';
    await promisify(execFile)('npm', [command, '--no-audit', '--no-fund', '--loglevel=error'], { cwd: PEERS_DIR, maxBuffer: 1 << 24 });
  })());
}

/** Imports a peer package from bench/peers. */
export async function importPeer<T>(name: string): Promise<T> {
  await ensurePeers();
  const resolved = createRequire(manifest).resolve(name);
  return (await import(pathToFileURL(resolved).href)) as T;
}

/** The path of a file inside a peer package. */
export async function peerPath(name: string, file: string): Promise<string> {
  await ensurePeers();
  return path.join(PEERS_DIR, 'node_modules', name, file);
}
