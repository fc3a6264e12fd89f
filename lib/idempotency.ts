/**
 * @module Idempotency keys: the window in which a repeated key answers with the original
 * message instead of storing a copy (docs/delivery-semantics.md), and the `auto` key.
 * A topic remembers its keys in publish order, so expiry stops at the first key still inside
 * the window.
 */

import { IDEMPOTENCY_WINDOW_MS } from "./config.ts";

/** What a remembered key holds: its characters, its message id and its Map entry. */
export function keySize(key: string): number {
  return 2 * key.length + KEY_OVERHEAD_BYTES;
}
const KEY_OVERHEAD_BYTES = 160;

/**
 * SHA-256 of a payload, hex: the key of `idempotency=auto`. Web Crypto, not `node:crypto`, whose
 * import would load Deno's Node compatibility layer: about 20 ms of every start (measured).
 */
export async function autoKey(payload: Uint8Array): Promise<string> {
  // payloads live in ArrayBuffers (slabs or copies), never in a SharedArrayBuffer
  const digest = await crypto.subtle.digest("SHA-256", payload as Uint8Array<ArrayBuffer>);
  return new Uint8Array(digest).toHex();
}

/** A key seen earlier: the message it named and when. */
export interface SeenKey {
  id: string;
  at: number;
}

/** One topic's remembered keys; each counts against the memory budget through `hold`. */
export class IdempotencyKeys {
  readonly #keys = new Map<string, SeenKey>();
  /** What the remembered keys hold, in bytes. */
  bytes = 0;
  /** Bytes of the KEY records that stand for keys in the WAL (keys whose message is gone). */
  readonly #frames = new Map<string, number>();

  /** `hold(bytes)` counts bytes held (negative: freed) on the topic and the budget. */
  constructor(private readonly hold: (bytes: number) => void) {}

  get size(): number {
    return this.#keys.size;
  }

  /** The message a key named, while the key is inside its window at `now`. */
  lookup(key: string, now: number): SeenKey | undefined {
    const seen = this.#keys.get(key);
    return seen && seen.at + IDEMPOTENCY_WINDOW_MS > now ? seen : undefined;
  }

  /** Whether a key seen at `at` is still inside its window at `now`. */
  static live(at: number, now: number): boolean {
    return at + IDEMPOTENCY_WINDOW_MS > now;
  }

  /** Remembers a key for its window; it counts against the budget meanwhile. */
  keep(key: string, id: string, at: number): void {
    // Kept again, it moves to the end: expiry walks the keys in the order they were last kept.
    if (!this.#keys.delete(key)) {
      this.bytes += keySize(key);
      this.hold(keySize(key));
    }
    this.#keys.set(key, { id, at });
  }

  /**
   * Notes that a key now stands in the WAL as a KEY record of `bytes` (0: as part of its
   * message's record); returns the change in bytes for the topic's live-bytes count.
   */
  framed(key: string, bytes: number): number {
    const before = this.#frames.get(key) ?? 0;
    if (bytes) this.#frames.set(key, bytes);
    else this.#frames.delete(key);
    return bytes - before;
  }

  /** When the oldest key leaves its window (Infinity: no key). */
  nextExpiry(): number {
    for (const v of this.#keys.values()) return v.at + IDEMPOTENCY_WINDOW_MS;
    return Infinity;
  }

  /** Drops keys older than the window; returns the bytes of their KEY records. */
  expire(now: number): number {
    let freed = 0;
    for (const [key, v] of this.#keys) {
      if (v.at + IDEMPOTENCY_WINDOW_MS > now) break;
      this.#keys.delete(key);
      this.bytes -= keySize(key);
      this.hold(-keySize(key));
      freed -= this.framed(key, 0);
    }
    return freed;
  }

  /** The keys still inside their window at `now`, oldest first (for a snapshot). */
  liveAt(now: number): [string, SeenKey][] {
    return [...this.#keys].filter(([, v]) => v.at + IDEMPOTENCY_WINDOW_MS > now);
  }
}
