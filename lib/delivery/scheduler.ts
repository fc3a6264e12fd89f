/**
 * @module Time moving forward: `sweep(now)` runs when the broker's alarm (alarm.ts) rings for
 * the earliest deadline `nextDue()` found, and by hand in tests. Its work is in two parts: what
 * writes records (a lease that ends becomes a REQUEUE or a dead-letter move), which only a node
 * that takes writes may do, and local work every node does on its own copy (TTL expiry, delays
 * coming due, idempotency keys leaving their window, long-poll timeouts, compaction).
 */

import type { Compactor } from "../storage/compactor.ts";
import { DLQ_SUFFIX } from "../config.ts";
import type { Consumers } from "./consumers.ts";
import type { BrokerContext } from "../context.ts";
import { leaseEnded } from "./deliveries.ts";
import type { Topic } from "../topic.ts";

/**
 * Shortest time between two sweeps the alarm runs: deadlines a millisecond apart (a burst of
 * delays or leases) are served together rather than one wake-up each.
 */
export const MIN_SWEEP_GAP_MS = 2;
/** How soon after a write the compaction check runs (writes are what make a file oversized). */
export const COMPACT_CHECK_MS = 1_000;

/** Moves the broker's time forward. */
export class Scheduler {
  constructor(
    private readonly ctx: BrokerContext,
    private readonly topics: () => Iterable<Topic>,
    private readonly consumers: Consumers,
    private readonly compactor: Compactor,
  ) {}

  /** Both parts: what a standalone broker (or a leader) runs each tick. */
  sweep(now: number): void {
    this.ctx.memory.tick(now);
    this.#eachTopic(now, (topic) => {
      this.#leaseEnds(topic, now);
      this.#local(topic, now);
    });
    this.consumers.expire(now);
  }

  /** The local part only, for a node that does not take writes. */
  sweepLocal(now: number): void {
    this.ctx.memory.tick(now);
    this.#eachTopic(now, (topic) => this.#local(topic, now));
    this.consumers.expire(now);
  }

  /**
   * The earliest deadline of any topic or waiting consumer (Infinity: none): when the next
   * sweep has work. Lease ends count only on a node that writes (`leases`).
   */
  nextDue(leases: boolean): number {
    let due = this.consumers.nextDeadline();
    for (const topic of this.topics()) {
      due = Math.min(due, topic.nextDue(leases && this.#recordable(topic)));
    }
    return due;
  }

  /**
   * Whether a lease end of `topic` can be recorded: not once its log or its dead-letter queue's
   * has failed (the lease stays as it is, rather than being tried again at every sweep).
   */
  #recordable(topic: Topic): boolean {
    return !topic.wal.failed && !this.ctx.findTopic(topic.name + DLQ_SUFFIX)?.wal.failed;
  }

  #eachTopic(now: number, work: (topic: Topic) => void): void {
    for (const topic of this.topics()) {
      try {
        work(topic);
      } catch (e) {
        // A bug in one topic's sweep must not stop time for the others, nor kill the process.
        this.ctx.log.error("sweep failed", { topic: topic.name, error: e, now });
      }
    }
  }

  /** Leases that ended become REQUEUE records or dead-letter moves. */
  #leaseEnds(topic: Topic, now: number): void {
    if (!this.#recordable(topic)) return;
    for (const g of topic.groups.values()) {
      for (const d of g.endedLeases(now)) leaseEnded(this.ctx, topic, g, d, now);
    }
  }

  #local(topic: Topic, now: number): void {
    while (topic.expiry.peekKey() <= now) topic.expireIfDue(topic.expiry.pop()!, now);
    for (const g of topic.groups.values()) {
      g.promoteDue(now);
      if (g.readyCount && this.consumers.waitingOn(g)) this.consumers.deliver(topic, g, now);
    }
    if (topic.keys.size) topic.expireKeys(now);
    this.compactor.maybeCompact(topic, now);
  }
}
