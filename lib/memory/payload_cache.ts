/**
 * @module The payloads kept in memory (BROKER_PAYLOAD_CACHE). A small payload is copied into a
 * slab when it is published; once its record is durable it is also in the WAL file, and the
 * broker keeps the most recent such payloads in memory up to this budget. Older ones are read
 * back from the file (the page cache, in practice) when delivered: holding 100,000 × 1 KiB
 * then costs the per-message heap and this budget, not the whole payload (issue 12: RSS was
 * 2.4-2.8 × the payload). Eviction goes in publish order, the order slabs fill in, so the
 * slabs of evicted payloads are freed whole. Replay keeps the oldest payloads (consumed next)
 * while there is room and leaves the rest in the file.
 * Without a file (`:memory:`) nothing is ever evicted.
 */

import { Deque } from "../deque.ts";

/** What the cache needs of a message (lib/message.ts's StoredMessage). */
export interface CachedMessage {
  /** Groups that still hold it: 0 once it is gone. */
  readonly pending: number;
  readonly onDisk: boolean;
  readonly payloadBytes: number;
}

/** What owns a cached message: its topic, which moves the payload to disk with its accounting. */
export interface CacheOwner {
  evict(msg: CachedMessage): void;
}

/** The most recent durable payloads kept in memory, up to `budget` bytes. */
export class PayloadCache {
  /** Payload bytes of the entries (some may be gone since: they leave when they reach the head). */
  bytes = 0;
  readonly #messages = new Deque<CachedMessage>();
  readonly #owners = new Deque<CacheOwner>();

  constructor(readonly budget: number) {}

  /** Whether payloads ever leave memory. */
  get bounded(): boolean {
    return this.budget !== Infinity;
  }

  /**
   * Keeps a durable message's payload in memory while the budget allows, evicting the oldest
   * others. Messages no group holds any longer are dropped from the head as they are met.
   */
  add(owner: CacheOwner, msg: CachedMessage): void {
    if (!this.bounded) return;
    this.#messages.push(msg);
    this.#owners.push(owner);
    this.bytes += msg.payloadBytes;
    while (this.bytes > this.budget || this.#headGone()) {
      const head = this.#messages.shift()!;
      const by = this.#owners.shift()!;
      this.bytes -= head.payloadBytes;
      if (head.pending > 0 && !head.onDisk) by.evict(head);
    }
  }

  /**
   * Lets go of the messages at the head that are gone (acked, purged), so that they do not keep
   * their slabs once nothing is published any more (the sweep calls this).
   */
  trim(): void {
    while (this.#headGone()) {
      this.bytes -= this.#messages.shift()!.payloadBytes;
      this.#owners.shift();
    }
  }

  #headGone(): boolean {
    const head = this.#messages.at(0);
    return head !== undefined && head.pending === 0;
  }

  /** Entries held now (for tests). */
  get size(): number {
    return this.#messages.length;
  }
}
