/**
 * @module The memory budget (BROKER_MAX_MEMORY): the bytes the broker holds for its messages
 * (payload while in memory, plus a fixed per-message overhead), its remembered idempotency keys
 * and the publish bodies being read; the rate at which they are freed; and the refusal
 * (`memory_full`, with a Retry-After from that rate) when a publish would pass the budget.
 * Moves between topics (dead-lettering, redrive) are never refused: they free what they take.
 */

import { BrokerError } from "./errors.ts";
import { PayloadCache } from "./payload_cache.ts";

/**
 * Memory a held message costs besides its payload: the StoredMessage, its Map entry, one
 * Delivery and queue slot (measured: ~450 B of JS heap per held 1 KiB message), rounded up.
 */
export const MESSAGE_OVERHEAD_BYTES = 512;
/** Bytes freed after which a broker that has gone quiet collects its garbage (see tick). */
export const COLLECT_AFTER_BYTES = 32 * 1024 * 1024;
/** How long nothing must be held or freed before that collection, over at least 3 ticks. */
export const COLLECT_QUIET_MS = 200;
const COLLECT_QUIET_TICKS = 3;
/**
 * No collection by hand while more than this is held: the pause grows with the heap (about
 * 0.2-0.4 s for 100,000 messages here); V8's own memory reducer collects such a heap later, in
 * steps.
 */
export const COLLECT_MAX_HELD_BYTES = 128 * 1024 * 1024;
/** A full GC, when the start task exposes it (`--expose-gc`). */
const exposedGc = (() => {
  const gc = (globalThis as { gc?: (o?: Record<string, string>) => void }).gc;
  // "last-resort": collect all that can be (also what a heap snapshot does), not one round.
  return gc && (() => gc({ type: "major", execution: "sync", flavor: "last-resort" }));
})();
/** How often the drain-rate estimate takes a new sample. */
const RATE_SAMPLE_MS = 1_000;
/** Weight of the newest sample in the drain-rate estimate. */
const RATE_WEIGHT = 0.3;
/** Bounds of the Retry-After a full broker answers with, in seconds. */
const RETRY_MIN_S = 1;
const RETRY_MAX_S = 60;

/** What holding a message of `payloadBytes` costs against the budget. */
export function heldSize(payloadBytes: number): number {
  return payloadBytes + MESSAGE_OVERHEAD_BYTES;
}

/** The broker-wide count of held bytes against the budget. */
export class MemoryBudget {
  /** Bytes held now. */
  held = 0;
  #freed = 0;
  #sampledAt: number | undefined;
  /** Bytes freed per second, smoothed. */
  drainRate = 0;
  #freedSinceCollect = 0;
  /** Counts add() and release() calls, so tick() sees whether anything moved. */
  #changes = 0;
  #changesSeen = 0;
  #quietSince = 0;
  #quietTicks = 0;
  /** Collections done (for tests and the log). */
  collections = 0;

  /** Which durable payloads stay in memory (BROKER_PAYLOAD_CACHE); the rest are read from disk. */
  readonly cache: PayloadCache;

  constructor(
    readonly budget: number,
    payloadCacheBytes = Infinity,
    /** Runs a full garbage collection; without `--expose-gc`, none. */
    readonly collect: (() => void) | undefined = exposedGc,
  ) {
    this.cache = new PayloadCache(payloadCacheBytes);
  }

  add(bytes: number): void {
    this.held += bytes;
    this.#changes++;
  }

  release(bytes: number): void {
    this.held -= bytes;
    this.#freed += bytes;
    this.#freedSinceCollect += bytes;
    this.#changes++;
  }

  /**
   * Moves the drain-rate estimate to `now` (the sweep calls this), and collects garbage once
   * a broker that freed COLLECT_AFTER_BYTES (acks, payloads leaving for the WAL file) has been
   * quiet for COLLECT_QUIET_MS. Freed slabs are ArrayBuffers in V8's old space: only a full GC
   * returns them, and V8's own memory reducer waits about 5 s of quiet before it starts one.
   */
  tick(now: number): void {
    this.cache.trim();
    this.#reclaim(now);
    if (this.#sampledAt === undefined) this.#sampledAt = now;
    const elapsed = now - this.#sampledAt;
    if (elapsed < RATE_SAMPLE_MS) return;
    const rate = this.#freed * 1000 / elapsed;
    this.drainRate = this.drainRate * (1 - RATE_WEIGHT) + rate * RATE_WEIGHT;
    this.#freed = 0;
    this.#sampledAt = now;
  }

  #reclaim(now: number): void {
    if (!this.collect || this.#freedSinceCollect < COLLECT_AFTER_BYTES) return;
    if (this.#changes !== this.#changesSeen) {
      this.#changesSeen = this.#changes;
      this.#quietSince = now;
      this.#quietTicks = 0;
    } else if (
      // Several ticks: the first one after a long pause (a GC) runs before the I/O that waited.
      ++this.#quietTicks >= COLLECT_QUIET_TICKS && now - this.#quietSince >= COLLECT_QUIET_MS &&
      this.held <= COLLECT_MAX_HELD_BYTES
    ) {
      this.#freedSinceCollect = 0;
      this.collections++;
      this.collect();
    }
  }

  /**
   * Admits a publish body of `payloadBytes` about to be read and counts it until the returned
   * function is called (the body is read, and its message counts itself, or the client left).
   * Giving a reservation back is not draining: it leaves the drain rate alone.
   */
  reserve(topic: string, payloadBytes: number): () => void {
    this.admit(topic, payloadBytes);
    const bytes = heldSize(payloadBytes);
    this.held += bytes;
    let reserved = true;
    return () => {
      if (reserved) this.held -= bytes;
      reserved = false;
    };
  }

  /** Throws `memory_full` when holding `payloadBytes` more would pass the budget. */
  admit(topic: string, payloadBytes: number): void {
    const need = heldSize(payloadBytes);
    if (this.held + need <= this.budget) return;
    const over = this.held + need - this.budget;
    const wait = this.drainRate > 0 ? Math.ceil(over / this.drainRate) : RETRY_MAX_S / 4;
    throw new BrokerError(
      "memory_full",
      `Cannot publish to "${topic}": the broker holds ${this.held} bytes of its ` +
        `${this.budget} (BROKER_MAX_MEMORY); retry once consumers have taken some`,
      Math.min(RETRY_MAX_S, Math.max(RETRY_MIN_S, wait)),
    );
  }
}
