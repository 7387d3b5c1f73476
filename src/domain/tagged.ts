// Tagged payloads in a model's text (seed 003 §S7): `<AGENT_UI_JSON>…</AGENT_UI_JSON>`
// carries a GenUI payload and `<AGENT_STATE_PATCH>…</AGENT_STATE_PATCH>` a patch
// of the phase's state. While the text streams, `TagFilter` withholds every
// tagged segment from the live deltas, holding back a partial tag across
// chunk boundaries. After the stream, `extractPayloads` parses the tags out
// of the full text and cleans what the user sees: echoed `[SESSION STATE]`
// blocks and forged tool tags are removed, and a malformed body is dropped
// and noted, never fatal.

export const UI_TAG = 'AGENT_UI_JSON';
export const STATE_TAG = 'AGENT_STATE_PATCH';
const TAGS = [UI_TAG, STATE_TAG] as const;
const OPENERS = TAGS.map((t) => `<${t}>`);

/**
 * Streams text with tagged segments removed. `push` returns what may be shown
 * now; text that could still turn out to open a tag is held until it cannot.
 * An unterminated segment is withheld to the end.
 */
export class TagFilter {
  #held = '';
  /** The closing tag of the segment being withheld, if inside one. */
  #inside: string | null = null;

  push(chunk: string): string {
    this.#held += chunk;
    let out = '';
    for (;;) {
      if (this.#inside) {
        const end = this.#held.indexOf(this.#inside);
        if (end < 0) {
          // Keep only what could be the start of the closing tag.
          this.#held = this.#held.slice(Math.max(0, this.#held.length - this.#inside.length + 1));
          return out;
        }
        this.#held = this.#held.slice(end + this.#inside.length);
        this.#inside = null;
        continue;
      }
      const open = firstOpener(this.#held);
      if (open) {
        out += this.#held.slice(0, open.at);
        this.#held = this.#held.slice(open.at + open.tag.length + 2);
        this.#inside = `</${open.tag}>`;
        continue;
      }
      const keep = partialOpenerAtEnd(this.#held);
      out += this.#held.slice(0, this.#held.length - keep);
      this.#held = this.#held.slice(this.#held.length - keep);
      return out;
    }
  }

  /** The end of the stream: held text that never became a tag is shown; an unclosed segment stays withheld. */
  end(): string {
    const rest = this.#inside ? '' : this.#held;
    this.#held = '';
    this.#inside = null;
    return rest;
  }
}

function firstOpener(text: string): { at: number; tag: string } | undefined {
  let best: { at: number; tag: string } | undefined;
  for (const tag of TAGS) {
    const at = text.indexOf(`<${tag}>`);
    if (at >= 0 && (!best || at < best.at)) best = { at, tag };
  }
  return best;
}

/** How many trailing characters could begin an opening tag. */
function partialOpenerAtEnd(text: string): number {
  const from = text.lastIndexOf('<');
  if (from < 0) return 0;
  const tail = text.slice(from);
  return OPENERS.some((o) => o.startsWith(tail) && o !== tail) ? tail.length : 0;
}

export interface Extracted {
  /** The text the user sees and the message stores: no tags, no echoes. */
  text: string;
  /** GenUI payloads, in order. */
  genui: Record<string, unknown>[];
  /** State patches, in order. */
  patches: Record<string, unknown>[];
  /** Bodies that were not JSON objects, or tags left open: dropped, and said why. */
  dropped: { tag: string; reason: string; body: string }[];
}

const TAGGED = new RegExp(`<(${TAGS.join('|')})>([\\s\\S]*?)(?:</\\1>|$)`, 'g');
/** An echo of the session state the prompt gave the model. */
const SESSION_STATE = /\[SESSION STATE\][\s\S]*?(?:\[\/SESSION STATE\]|$)/g;
/** Tool-call markup a model may forge in its text; tool calls are real only through the tool service. */
const FORGED_TOOLS = /<(?:mcp_[a-z0-9_]+|tool_call|tool_result|function_call)\b[^>]*\/>|<(mcp_[a-z0-9_]+|tool_call|tool_result|function_call)\b[^>]*>[\s\S]*?(?:<\/\1>|$)/gi;

/** Parses every tagged payload out of a full reply and cleans the text. */
export function extractPayloads(full: string): Extracted {
  const genui: Record<string, unknown>[] = [];
  const patches: Record<string, unknown>[] = [];
  const dropped: Extracted['dropped'] = [];
  const text = full.replace(TAGGED, (whole, tag: string, body: string) => {
    if (!whole.endsWith(`</${tag}>`)) {
      dropped.push({ tag, reason: 'the tag is never closed', body: body.slice(0, 500) });
      return '';
    }
    const parsed = parseObject(body);
    if (typeof parsed === 'string') dropped.push({ tag, reason: parsed, body: body.slice(0, 500) });
    else (tag === UI_TAG ? genui : patches).push(parsed);
    return '';
  });
  return { text: tidy(text.replace(SESSION_STATE, '').replace(FORGED_TOOLS, '')), genui, patches, dropped };
}

function parseObject(body: string): Record<string, unknown> | string {
  let value: unknown;
  try {
    value = JSON.parse(body.trim());
  } catch (error) {
    return `not JSON: ${(error as Error).message}`;
  }
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : 'not a JSON object';
}

/** Collapses the blank lines removed segments leave behind. */
const tidy = (text: string) => text.replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim();

/**
 * Merges a state patch into a phase's state as a JSON Merge Patch (RFC 7396): objects merge key by key, any
 * other value (arrays included) replaces, and `null` deletes the key.
 */
export function mergePatch(state: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...state };
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else if (isObject(value) && isObject(out[key])) out[key] = mergePatch(out[key] as Record<string, unknown>, value);
    else out[key] = value;
  }
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> => Boolean(v) && typeof v === 'object' && !Array.isArray(v);
