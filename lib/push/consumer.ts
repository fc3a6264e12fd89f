/**
 * @module A push consumer: one that stays on a group and is handed deliveries as it has room
 * (NSQ's RDY count), where a long-poll takes once and leaves. It holds a lease on each delivery
 * it was handed until it settles it (ack, requeue) or the lease ends; its credits are its limit
 * minus what it holds, so a consumer that drops deliveries never starves, and nothing outside it
 * does arithmetic on its credits. Webhook pushers and consuming WebSockets are push consumers;
 * each says how it sends one delivery and what its limit is now.
 */

import type { Consumer, Consumers, Offered } from "../delivery/consumers.ts";
import type { Group } from "../delivery/group.ts";
import type { Topic } from "../topic.ts";
import { type Handed, handed } from "../delivery/deliveries.ts";

/** What a push consumer needs of the delivery pipeline. */
export type PushPipeline = Pick<Consumers, "add" | "deliver">;

export abstract class PushConsumer implements Consumer {
  readonly filter: Consumer["filter"] = undefined;
  readonly peek = false;
  readonly deadline = Infinity;
  readonly once = false;
  /** Deliveries handed over and not settled: id → when the lease ends. */
  readonly #held = new Map<string, number>();
  /** No lease in #held ends before this, so counting credits rarely walks it. */
  #nextEnd = Infinity;
  #remove: (() => void) | undefined;

  constructor(
    readonly pipeline: PushPipeline,
    readonly topic: Topic,
    readonly group: Group,
    readonly visibilityMs: number,
    readonly clock: () => number,
  ) {}

  /** Most deliveries it may hold now. */
  protected abstract get limit(): number;

  /**
   * Sends one delivery (`ephemeral`: a broadcast, which holds no lease). False when the
   * transport can take no more: the rest of this offer is not sent (their leases end).
   */
  protected abstract send(item: Offered, ephemeral: boolean): boolean;

  /** Told once when the pipeline removes it unserved (the topic deleted, the broker draining). */
  protected closed(): void {}

  get credits(): number {
    const now = this.clock();
    if (now >= this.#nextEnd) {
      this.#nextEnd = Infinity;
      for (const [id, end] of this.#held) {
        if (end <= now) this.#held.delete(id);
        else this.#nextEnd = Math.min(this.#nextEnd, end);
      }
    }
    return Math.max(0, this.limit - this.#held.size);
  }

  /** Deliveries it holds, leases ended or not. */
  get held(): number {
    return this.#held.size;
  }

  /** Whether it is in the pipeline. */
  get started(): boolean {
    return this.#remove !== undefined;
  }

  /** Joins the pipeline; it is handed what is ready at once. */
  start(now: number): void {
    this.#remove ??= this.pipeline.add(this.topic, this, now);
  }

  /** Leaves the pipeline; what it holds comes back when the leases end. */
  stop(): void {
    this.#remove?.();
    this.#remove = undefined;
  }

  /** Gives back the credit of `id` (acked, requeued, or its send finished). */
  settle(id: string): void {
    this.#held.delete(id);
  }

  /** Hands over what is ready, up to the credits. */
  serve(now: number): void {
    if (this.#remove) this.pipeline.deliver(this.topic, this.group, now);
  }

  offer(items: Offered[], ephemeral: boolean): void {
    if (!ephemeral) {
      // Every item is leased to this consumer now, sent or not.
      const end = this.clock() + this.visibilityMs;
      for (const item of items) this.#held.set(item.msg.id, end);
      if (items.length) this.#nextEnd = Math.min(this.#nextEnd, end);
    }
    for (const item of items) if (!this.send(item, ephemeral)) return;
  }

  close(): void {
    this.#remove = undefined;
    this.closed();
  }
}

/**
 * Where a transport's push consumer sends (a consuming WebSocket): the transport says how many
 * deliveries it may hold and sends each one; the consumer keeps the leases and the credits.
 */
export interface PushSink {
  /** Most deliveries it may hold now. */
  readonly limit: number;
  /** Sends one delivery; false when the transport can take no more (see PushConsumer.send). */
  send(delivery: Handed, ephemeral: boolean): boolean;
  /** Told once when the pipeline removes it unserved (the topic deleted, the broker draining). */
  closed(): void;
}

/** A push consumer that hands each delivery, as the wire shows it, to a sink. */
export class SinkConsumer extends PushConsumer {
  constructor(
    pipeline: PushPipeline,
    topic: Topic,
    group: Group,
    visibilityMs: number,
    clock: () => number,
    readonly sink: PushSink,
  ) {
    super(pipeline, topic, group, visibilityMs, clock);
  }

  protected get limit(): number {
    return this.sink.limit;
  }

  protected send(item: Offered, ephemeral: boolean): boolean {
    const h = handed(this.topic.name, item, this.group.name, item.msg.origin);
    return this.sink.send(h, ephemeral);
  }

  protected override closed(): void {
    this.sink.closed();
  }
}

/**
 * What a transport holds of its push consumer: joining, leaving, settling, serving; and, for one
 * on another worker, `ready` once it exists there (its group too: confirm the subscription after
 * it, or a message published meanwhile falls before the group's start). It rejects with the
 * refusal a local `pushConsumer` would have thrown.
 */
export type PushHandle = Pick<SinkConsumer, "start" | "stop" | "settle" | "serve"> & {
  ready?: Promise<void>;
};
