// JSON pointers (RFC 6901): read a value out of a document, or set one into it.

export function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw new Error(`${JSON.stringify(pointer)} is not a JSON pointer`);
  return pointer.slice(1).split('/').map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** The value at `pointer`, or undefined. */
export function getPointer(doc: unknown, pointer: string): unknown {
  let at = doc;
  for (const token of parsePointer(pointer)) {
    if (at === null || typeof at !== 'object' || !Object.hasOwn(at, token)) return undefined;
    at = (at as Record<string, unknown>)[token];
  }
  return at;
}

/** Sets `value` at `pointer` in `doc`, creating objects on the way; the root cannot be set. */
export function setPointer(doc: Record<string, unknown>, pointer: string, value: unknown): void {
  const tokens = parsePointer(pointer);
  if (!tokens.length) throw new Error('the root cannot be set');
  let at: Record<string, unknown> = doc;
  for (const token of tokens.slice(0, -1)) {
    if (at[token] === null || typeof at[token] !== 'object') at[token] = {};
    at = at[token] as Record<string, unknown>;
  }
  at[tokens.at(-1)!] = value;
}
