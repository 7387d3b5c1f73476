// A bounded cache of credential lookups: entries expire after `ttlMs`, and when
// full the oldest goes first, so a flood of random credentials cannot grow memory.
// Callers that miss on one key together share one lookup.

export class TtlCache<V> {
  readonly #entries = new Map<string, { value: V; until: number }>();
  /** Lookups under way, by key; a failed one is not cached. */
  readonly #loading = new Map<string, Promise<V>>();

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

  /** The live value for `key`, else what `load` finds, cached: a burst of misses on one key loads it once. */
  getOrLoad(key: string, load: () => Promise<V>): Promise<V> {
    const hit = this.get(key);
    if (hit) return Promise.resolve(hit.value);
    let loading = this.#loading.get(key);
    if (!loading) {
      loading = load()
        .then((value) => (this.set(key, value), value))
        .finally(() => this.#loading.delete(key));
      this.#loading.set(key, loading);
    }
    return loading;
  }
}
