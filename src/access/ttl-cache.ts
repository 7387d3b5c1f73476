// A bounded cache of credential lookups: entries expire after `ttlMs`, and when
// full the oldest goes first, so a flood of random credentials cannot grow memory.

export class TtlCache<V> {
  readonly #entries = new Map<string, { value: V; until: number }>();

  constructor(
    readonly ttlMs: number,
    readonly max: number,
  ) {}

  /** The live entry for `key`, if any; `{ value }` so a cached null is a hit. */
  get(key: string): { value: V } | undefined {
    const hit = this.#entries.get(key);
    if (!hit) return undefined;
    if (hit.until > Date.now()) return hit;
    this.#entries.delete(key);
    return undefined;
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }

  set(key: string, value: V): void {
    if (this.#entries.size >= this.max) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(key, { value, until: Date.now() + this.ttlMs });
  }
}
