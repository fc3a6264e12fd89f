/**
 * @module Per-key publish limits (docs/security.md "Per-key limits"): a token bucket of messages
 * and one of payload bytes for each key that sets `rate=` or `bytes=`. A bucket holds one
 * second of its rate and refills continuously. A publish is admitted while neither bucket is
 * empty and then takes what it carries, even past empty: a batch larger than a second's worth
 * still goes through once, and the key waits that much longer after it. Refused, it learns how
 * long until the buckets hold something again.
 *
 * Buckets belong to a key, found by its digest, never by its name: two keys never share one.
 *
 * The buckets live in one buffer, a SharedArrayBuffer when the broker runs several workers
 * (BROKER_WORKERS), so a key's rate is the whole broker's, whichever worker its requests reach;
 * each key's buckets are changed under a lock of their own. Installing keys (start-up, SIGHUP)
 * fills every bucket.
 */

import type { ApiKey } from "./auth.ts";
import { epochClock } from "./cluster/state.ts";
import { hexOf } from "../protocol/key_hash.ts";

/** Float64 fields per key: messages' tokens and last refill, bytes' tokens and last refill. */
const FIELDS = 4;

/** The limited keys of `keys`, in the order their slots are laid out. */
function limited(keys: readonly ApiKey[]): ApiKey[] {
  return keys.filter((k) =>
    k.limits.messagesPerSecond !== undefined || k.limits.bytesPerSecond !== undefined
  );
}

interface Slot {
  index: number;
  key: ApiKey;
}

/** Every limited key's buckets, by the key's digest. */
export class RateLimiter {
  #slots = new Map<string, Slot>();
  /** The same by the installed key objects (null: not limited), so a publish hashes nothing. */
  #byKey = new WeakMap<ApiKey, Slot | null>();
  #state: Float64Array<ArrayBufferLike> = new Float64Array(0);
  #locks: Int32Array<ArrayBufferLike> = new Int32Array(0);

  constructor(readonly clock: () => number = epochClock) {}

  /**
   * The buckets of `keys`, full, in a buffer every worker can share (`replace(keys, buffer)`);
   * a plain one when `shared` is false.
   */
  static buffer(
    keys: readonly ApiKey[],
    now: number = epochClock(),
    shared = true,
  ): SharedArrayBuffer | ArrayBuffer {
    const n = limited(keys).length;
    const bytes = n * FIELDS * 8 + n * 4;
    const buffer = shared ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes);
    const state = new Float64Array(buffer, 0, n * FIELDS);
    limited(keys).forEach((k, i) => {
      state.set([k.limits.messagesPerSecond ?? 0, now, k.limits.bytesPerSecond ?? 0, now], i * 4);
    });
    return buffer;
  }

  /**
   * Takes the limits of `keys` and their buckets: `buffer` as `RateLimiter.buffer(keys)` made
   * it (shared by the workers), or a fresh one of this limiter's own.
   */
  replace(keys: readonly ApiKey[], buffer?: SharedArrayBuffer | ArrayBuffer): void {
    const list = limited(keys);
    const b = buffer ?? RateLimiter.buffer(keys, this.clock(), false);
    this.#state = new Float64Array(b, 0, list.length * FIELDS);
    this.#locks = new Int32Array(b, list.length * FIELDS * 8, list.length);
    this.#slots = new Map(list.map((key, index) => [hexOf(key.digest), { index, key }]));
    this.#byKey = new WeakMap(keys.map((k) => [k, this.#slots.get(hexOf(k.digest)) ?? null]));
  }

  /**
   * Admits a publish of `messages` carrying `bytes` by `key`: 0 when admitted (and taken from
   * its buckets), else the ms to wait before one can be.
   */
  admit(key: ApiKey, messages: number, bytes: number): number {
    return this.#locked(key, 0, (at, m, y, now) => {
      const mWait = m === undefined ? 0 : this.#refill(at, m, now);
      const yWait = y === undefined ? 0 : this.#refill(at + 2, y, now);
      if (mWait > 0 || yWait > 0) return Math.max(mWait, yWait);
      if (m !== undefined) this.#state[at] = this.#state[at]! - messages;
      if (y !== undefined) this.#state[at + 2] = this.#state[at + 2]! - bytes;
      return 0;
    });
  }

  /**
   * Takes `messages` and `bytes` from `key`'s buckets without refusing: the rest of a publish
   * admitted before its body was read (a negative count gives back an estimate).
   */
  take(key: ApiKey, messages: number, bytes: number): void {
    this.#locked(key, undefined, (at, m, y, now) => {
      const s = this.#state;
      if (m !== undefined) {
        this.#refill(at, m, now);
        s[at] = Math.min(m, s[at]! - messages);
      }
      if (y !== undefined) {
        this.#refill(at + 2, y, now);
        s[at + 2] = Math.min(y, s[at + 2]! - bytes);
      }
    });
  }

  /**
   * Runs `fn` on `key`'s buckets (their first field, its two rates, the time) under their lock;
   * `unlimited` for a key without limits.
   */
  #locked<T>(
    key: ApiKey,
    unlimited: T,
    fn: (at: number, m: number | undefined, y: number | undefined, now: number) => T,
  ): T {
    const slot = this.#slotOf(key);
    if (!slot) return unlimited;
    const { messagesPerSecond: m, bytesPerSecond: y } = slot.key.limits;
    const locks = this.#locks;
    // Held for a few arithmetic steps: another worker using the same key spins that long.
    while (Atomics.compareExchange(locks, slot.index, 0, 1) !== 0) { /* spin */ }
    try {
      return fn(slot.index * FIELDS, m, y, this.clock());
    } finally {
      Atomics.store(locks, slot.index, 0);
    }
  }

  /** The buckets of `key`; a key found before a reload (SIGHUP) is found again by its digest. */
  #slotOf(key: ApiKey): Slot | null | undefined {
    const known = this.#byKey.get(key);
    return known === undefined ? this.#slots.get(hexOf(key.digest)) : known;
  }

  /** Refills the bucket at `i` (tokens, then its last refill) to `now`; ms until it is not empty. */
  #refill(i: number, rate: number, now: number): number {
    const s = this.#state;
    const tokens = Math.min(rate, s[i]! + Math.max(0, now - s[i + 1]!) / 1000 * rate);
    s[i] = tokens;
    s[i + 1] = Math.max(now, s[i + 1]!);
    return tokens > 0 ? 0 : (-tokens / rate) * 1000 + 1;
  }
}
