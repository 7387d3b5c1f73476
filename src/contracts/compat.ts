// Contract schemas evolve additively (seed 000: fields are only added; a
// removal or a change of meaning is a major version). This walks an old and a
// new schema side by side and lists every change that is not additive.
import type { ContractVersion, SchemaKind } from './registry.js';

type Schema = Record<string, any>;

const NARROWING: [keyword: string, narrower: (o: number, n: number) => boolean][] = [
  ['minLength', (o, n) => n > o],
  ['minimum', (o, n) => n > o],
  ['minItems', (o, n) => n > o],
  ['maxLength', (o, n) => n < o],
  ['maximum', (o, n) => n < o],
  ['maxItems', (o, n) => n < o],
];

/** Paths whose const legitimately changes between versions. */
const VERSION_CONST = /\/properties\/contract\/properties\/version$/;

export function breakingChanges(previous: ContractVersion, next: ContractVersion): string[] {
  const out: string[] = [];
  for (const kind of Object.keys(previous.schemas) as SchemaKind[]) {
    walk(previous.schemas[kind], next.schemas[kind] ?? {}, `${kind}#`, kind === 'request', out);
  }
  return out;
}

function walk(a: Schema, b: Schema, at: string, isRequest: boolean, out: string[]): void {
  if (typeof a !== 'object' || a === null) return;
  if (JSON.stringify(a.type) !== JSON.stringify(b.type) && a.type !== undefined) out.push(`${at}: type changed from ${JSON.stringify(a.type)} to ${JSON.stringify(b.type)}`);
  if ('const' in a && JSON.stringify(a.const) !== JSON.stringify(b.const) && !VERSION_CONST.test(at)) out.push(`${at}: const changed`);
  if (Array.isArray(a.enum)) {
    const removed = a.enum.filter((v: unknown) => !(b.enum ?? []).includes(v));
    if (removed.length) out.push(`${at}: enum values removed: ${removed.join(', ')}`);
  }
  for (const [keyword, narrower] of NARROWING) {
    if (typeof b[keyword] === 'number' && (typeof a[keyword] !== 'number' || narrower(a[keyword], b[keyword]))) out.push(`${at}: ${keyword} narrowed`);
  }
  if (a.additionalProperties !== false && b.additionalProperties === false) out.push(`${at}: additionalProperties closed`);
  const aReq = new Set<string>(a.required ?? []);
  const bReq = new Set<string>(b.required ?? []);
  // A new required request field breaks old callers; a dropped required response field breaks old readers.
  for (const r of bReq) if (isRequest && !aReq.has(r)) out.push(`${at}: ${r} became required`);
  for (const r of aReq) if (!isRequest && !bReq.has(r)) out.push(`${at}: ${r} is no longer guaranteed`);
  for (const [name, sub] of Object.entries<Schema>(a.properties ?? {})) {
    if (!b.properties?.[name]) out.push(`${at}/properties/${name}: removed`);
    else walk(sub, b.properties[name], `${at}/properties/${name}`, isRequest, out);
  }
  for (const [name, sub] of Object.entries<Schema>(a.$defs ?? {})) {
    if (!b.$defs?.[name]) out.push(`${at}/$defs/${name}: removed`);
    else walk(sub, b.$defs[name], `${at}/$defs/${name}`, isRequest, out);
  }
  if (a.items) walk(a.items, b.items ?? {}, `${at}/items`, isRequest, out);
  for (const key of ['oneOf', 'anyOf', 'allOf'] as const) {
    (a[key] ?? []).forEach((sub: Schema, i: number) => {
      if (!b[key]?.[i]) out.push(`${at}/${key}/${i}: removed`);
      else walk(sub, b[key][i], `${at}/${key}/${i}`, isRequest, out);
    });
  }
}
