// A small logic-less template language over one JSON document, for artifacts:
//   {{/a/b}}                      the value at a JSON pointer (objects as JSON)
//   {{#each /list}}…{{/each}}     once per item; inside, {{.}} is the item and {{./x}} a pointer into it
//   {{#if /x}}…{{/if}}            only when the value is present and not false, 0, "" or []

import { getPointer } from './pointer.js';

type Node = { text: string } | { value: string } | { block: 'each' | 'if'; pointer: string; body: Node[] };

const TAG = /\{\{\s*(#each|#if|\/each|\/if)?\s*([^}]*?)\s*\}\}/g;

/** Parses a template; an unbalanced block is an error, reported before any render. */
export function parseTemplate(source: string): Node[] {
  const root: Node[] = [];
  const stack: { nodes: Node[]; block?: 'each' | 'if' }[] = [{ nodes: root }];
  let last = 0;
  for (const m of source.matchAll(TAG)) {
    const top = stack.at(-1)!;
    if (m.index > last) top.nodes.push({ text: source.slice(last, m.index) });
    last = m.index + m[0].length;
    const [, keyword, arg = ''] = m;
    if (keyword === '#each' || keyword === '#if') {
      const node = { block: keyword.slice(1) as 'each' | 'if', pointer: arg, body: [] as Node[] };
      top.nodes.push(node);
      stack.push({ nodes: node.body, block: node.block });
    } else if (keyword) {
      if (top.block !== keyword.slice(1)) throw new Error(`{{${keyword}}} closes no open block at offset ${m.index}`);
      stack.pop();
    } else top.nodes.push({ value: arg });
  }
  if (stack.length > 1) throw new Error(`{{#${stack.at(-1)!.block}}} is never closed`);
  if (last < source.length) root.push({ text: source.slice(last) });
  return root;
}

export function renderTemplate(source: string, doc: unknown): string {
  return renderNodes(parseTemplate(source), doc, doc);
}

function renderNodes(nodes: Node[], root: unknown, item: unknown): string {
  let out = '';
  for (const n of nodes) {
    if ('text' in n) out += n.text;
    else if ('value' in n) out += show(resolve(n.value, root, item));
    else {
      const value = resolve(n.pointer, root, item);
      if (n.block === 'if') {
        if (truthy(value)) out += renderNodes(n.body, root, item);
      } else if (Array.isArray(value)) for (const x of value) out += renderNodes(n.body, root, x);
    }
  }
  return out;
}

function resolve(ref: string, root: unknown, item: unknown): unknown {
  if (ref === '.') return item;
  if (ref.startsWith('./')) return getPointer(item, ref.slice(1));
  return getPointer(root, ref);
}

const truthy = (v: unknown) => v !== undefined && v !== null && v !== false && v !== 0 && v !== '' && !(Array.isArray(v) && v.length === 0);

function show(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return JSON.stringify(v);
}
