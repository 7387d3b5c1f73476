// Conditions on JSON values, addressed by dotted paths (`amount`,
// `to.country`): the policy's argument rules and a workflow's stage, guard
// and completion rules speak the same small language.

export interface Condition {
  eq?: unknown;
  ne?: unknown;
  gt?: number;
  gte?: number;
  lt?: number;
  lte?: number;
  in?: unknown[];
  exists?: boolean;
  matches?: string;
}

/** Its JSON Schema: an object of at least one comparison. */
export const CONDITION_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    eq: {}, ne: {}, in: { type: 'array' }, exists: { type: 'boolean' },
    gt: { type: 'number' }, gte: { type: 'number' }, lt: { type: 'number' }, lte: { type: 'number' },
    matches: { type: 'string' },
  },
} as const;

/** The value at a dotted path, or undefined. */
export function valueAt(doc: unknown, path: string): unknown {
  let value: unknown = doc;
  for (const key of path.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

/** Whether every comparison of `cond` holds for `value`. */
export function matches(value: unknown, cond: Condition): boolean {
  const num = typeof value === 'number' ? value : undefined;
  if (cond.exists !== undefined && (value !== undefined) !== cond.exists) return false;
  if ('eq' in cond && !sameJson(value, cond.eq)) return false;
  if ('ne' in cond && sameJson(value, cond.ne)) return false;
  if (cond.in && !cond.in.some((v) => sameJson(v, value))) return false;
  if (cond.gt !== undefined && !(num !== undefined && num > cond.gt)) return false;
  if (cond.gte !== undefined && !(num !== undefined && num >= cond.gte)) return false;
  if (cond.lt !== undefined && !(num !== undefined && num < cond.lt)) return false;
  if (cond.lte !== undefined && !(num !== undefined && num <= cond.lte)) return false;
  if (cond.matches !== undefined && !(typeof value === 'string' && new RegExp(cond.matches).test(value))) return false;
  return true;
}

/** Whether every path's condition holds in `doc`. */
export const allMatch = (doc: unknown, conds: Record<string, Condition>): boolean => Object.entries(conds).every(([path, cond]) => matches(valueAt(doc, path), cond));

/** The first `matches` pattern that is not a valid regular expression, by its path. */
export function badPattern(conds: Record<string, Condition>): string | undefined {
  for (const [path, cond] of Object.entries(conds)) {
    if (cond.matches === undefined) continue;
    try {
      new RegExp(cond.matches);
    } catch {
      return path;
    }
  }
  return undefined;
}

const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
