/**
 * @module The memory budget (BROKER_MAX_MEMORY): the bytes the broker holds for its messages
 * (payload while in memory, plus a fixed per-message overhead), its remembered idempotency keys
 * and the bytes of publish bodies being read, as they arrive; the rate at which they are freed; and the refusal
 * (`memory_full`, with a Retry-After from that rate) when a publish would pass the budget.
 * Moves between topics (dead-lettering, redrive) are never refused: they free what they take.
 */

import { FIGURE_HELD_BYTES, type SharedFigures } from "../shard.ts";
import { BrokerError } from "../errors.ts";
import { PayloadCache } from "./payload_cache.ts";

/**
 * Memory a held message costs besides its payload: the StoredMessage, its Map entry, one
 * Delivery and queue slot (measured: ~450 B of JS heap per held 1 KiB message), rounded up.
 */
export const MESSAGE_OVERHEAD_BYTES = 512;
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
  #held = 0;
  #freed = 0;
  #sampledAt: number | undefined;
  /** Bytes freed per second, smoothed. */
  drainRate = 0;

  /** Which durable payloads stay in memory (BROKER_PAYLOAD_CACHE); the rest are read from disk. */
  readonly cache: PayloadCache;

  constructor(
    readonly budget: number,
    payloadCacheBytes = Infinity,
    /** With several workers, what the others hold counts too (lib/shard.ts). */
    private readonly shared?: SharedFigures,
  ) {
    this.cache = new PayloadCache(payloadCacheBytes);
  }

  /** Bytes this broker (this worker) holds now. */
  get held(): number {
    return this.#held;
  }
  private set held(bytes: number) {
    this.#held = bytes;
    this.shared?.set(FIGURE_HELD_BYTES, bytes);
  }

  /** Bytes held now by every worker of the broker. */
  get heldEverywhere(): number {
    return this.#held + (this.shared?.others(FIGURE_HELD_BYTES) ?? 0);
  }

  add(bytes: number): void {
    this.held += bytes;
  }

  release(bytes: number): void {
    this.held -= bytes;
    this.#freed += bytes;
  }

  /**
   * Moves the drain-rate estimate to `now` (the sweep calls this), and trims the payload cache.
   * Freed slabs stay in V8's old space until a full GC: lib/memory/idle_gc.ts runs one when requests
   * stop after a burst, else V8's memory reducer does, seconds later.
   */
  tick(now: number): void {
    this.cache.trim();
    if (this.#sampledAt === undefined) this.#sampledAt = now;
    const elapsed = now - this.#sampledAt;
    if (elapsed < RATE_SAMPLE_MS) return;
    const rate = this.#freed * 1000 / elapsed;
    this.drainRate = this.drainRate * (1 - RATE_WEIGHT) + rate * RATE_WEIGHT;
    this.#freed = 0;
    this.#sampledAt = now;
  }

  /**
   * When `tick()` has work next: a second after the last sample while bytes were freed or the
   * estimate has not decayed to nothing; Infinity while idle (nothing to measure).
   */
  nextTick(): number {
    if (this.#sampledAt === undefined) return Infinity;
    return this.#freed > 0 || this.drainRate >= 1 ? this.#sampledAt + RATE_SAMPLE_MS : Infinity;
  }

  /**
   * Admits a publish body that declares `declaredBytes` (0 when it does not say), refused when
   * that much could not be held now, and counts its bytes as they arrive (`add`, refused past the
   * budget) until `release`: a body that stalls holds what it sent, not what it declared.
   * `refused` hears each refusal. Giving the bytes back is not draining: the drain rate stays.
   */
  reserve(topic: string, declaredBytes: number, refused?: () => void): BodyHold {
    try {
      this.admit(topic, declaredBytes);
    } catch (e) {
      refused?.();
      throw e;
    }
    return new BodyHold(this, topic, refused);
  }

  /** Counts `bytes` of a body being read; `memory_full` when they would pass the budget. */
  holdBody(topic: string, bytes: number): void {
    this.admit(topic, bytes, 0);
    this.held += bytes;
  }

  /** Gives back `bytes` of a body that was being read. */
  releaseBody(bytes: number): void {
    this.held -= bytes;
  }

  /**
   * Throws `memory_full` when holding `payloadBytes` more, in `messages` messages, would pass
   * the budget.
   */
  admit(topic: string, payloadBytes: number, messages = 1): void {
    const need = payloadBytes + messages * MESSAGE_OVERHEAD_BYTES;
    const held = this.shared ? this.heldEverywhere : this.#held;
    if (held + need <= this.budget) return;
    const over = held + need - this.budget;
    const wait = this.drainRate > 0 ? Math.ceil(over / this.drainRate) : RETRY_MAX_S / 4;
    throw new BrokerError(
      "memory_full",
      `Cannot publish to "${topic}": the broker holds ${held} bytes of its ` +
        `${this.budget} (BROKER_MAX_MEMORY); retry once consumers have taken some`,
      Math.min(RETRY_MAX_S, Math.max(RETRY_MIN_S, wait)),
    );
  }
}

/** What a publish body being read holds of the budget (MemoryBudget.reserve). */
export class BodyHold {
  #bytes = 0;

  constructor(
    private readonly budget: MemoryBudget,
    private readonly topic: string,
    private readonly refused?: () => void,
  ) {}

  /** Counts `bytes` more of the body; throws `memory_full` when they would pass the budget. */
  add(bytes: number): void {
    try {
      this.budget.holdBody(this.topic, bytes);
    } catch (e) {
      this.refused?.();
      throw e;
    }
    this.#bytes += bytes;
  }

  /** Gives back what the body holds (read, and its message counts itself; or abandoned). */
  release(): void {
    this.budget.releaseBody(this.#bytes);
    this.#bytes = 0;
  }
}
