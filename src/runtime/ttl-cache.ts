// A bounded cache of lookups (credentials, catalogs): entries expire after
// `ttlMs`, and when full the oldest goes first, so a flood of random keys cannot
// grow memory. Callers that miss on one key together share one lookup. clear()
// drops everything, lookups under way included: what they find predates it.

export class TtlCache<V> {
  readonly #entries = new Map<string, { value: V; until: number }>();
  /** Lookups under way, by key; a failed one is not cached. */
  readonly #loading = new Map<string, Promise<V>>();
  /** Bumped by clear(): a lookup that began before it is not kept. */
  #generation = 0;

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

  /** Drops every entry, and the lookups under way: they began before what clears the cache. */
  clear(): void {
    this.#generation++;
    this.#entries.clear();
    this.#loading.clear();
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
      const generation = this.#generation;
      const started: Promise<V> = load()
        .then((value) => (generation === this.#generation && this.set(key, value), value))
        .finally(() => this.#loading.get(key) === started && this.#loading.delete(key));
      this.#loading.set(key, (loading = started));
    }
    return loading;
  }
}
