// Failed authentications per client address, over a sliding minute: past the
// limit, the address gets 429 until its oldest failure is a minute old. Kept in
// memory by each gateway replica; bounded, least recently failed forgotten first.
const WINDOW_MS = 60_000;
const MAX_ADDRESSES = 10_000;

export class AuthFailures {
  readonly #limit: number;
  readonly #byAddress = new Map<string, number[]>();

  constructor(perMinute: number) {
    this.#limit = perMinute;
  }

  record(address: string, now = Date.now()): void {
    const times = this.#recent(address, now);
    times.push(now);
    this.#byAddress.delete(address);
    this.#byAddress.set(address, times.slice(-this.#limit));
    if (this.#byAddress.size > MAX_ADDRESSES) this.#byAddress.delete(this.#byAddress.keys().next().value!);
  }

  /** Seconds until the address may try again; 0 when it may now. */
  blockedFor(address: string, now = Date.now()): number {
    const times = this.#recent(address, now);
    if (times.length < this.#limit) return 0;
    return Math.max(1, Math.ceil((times[0]! + WINDOW_MS - now) / 1000));
  }

  #recent(address: string, now: number): number[] {
    const times = (this.#byAddress.get(address) ?? []).filter((t) => t > now - WINDOW_MS);
    if (times.length === 0) this.#byAddress.delete(address);
    return times;
  }
}
