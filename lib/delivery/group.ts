/**
 * @module A consumer group's own copy of a topic. Each delivery is in exactly one state:
 * ready (in one of three priority FIFOs), delayed (in a heap by due time), in flight (leased,
 * in a heap by lease end) or done. Stale heap and FIFO entries are skipped, never searched for.
 * A filtered take examines at most FILTER_SCAN_WINDOW deliveries; while filtered consumers wait,
 * the group also notes what becomes ready, so that they look at that alone (consumers.ts).
 */

import { Deque } from "../deque.ts";
import { Heap } from "../heap.ts";
import { type Delivery, type MessageFilter, State, type StoredMessage } from "../message.ts";

/**
 * Most deliveries one filtered take examines, in delivery order (docs/api/consume.md): a match
 * further back is not found by that take. Bounds the work of one request as SQS and JetStream
 * bound their scans.
 */
export const FILTER_SCAN_WINDOW = 1_000;

const NONE: readonly Delivery[] = Object.freeze([]);

interface LeaseEntry {
  d: Delivery;
  lease: number;
}

/** What one consume asks of a group. */
export interface TakeSpec {
  readonly limit: number;
  readonly peek: boolean;
  readonly filter: MessageFilter | undefined;
  /** The lease of what is taken (ignored by peeks). */
  readonly visibilityMs: number;
  /** Look only at these deliveries (what became ready since the consumer last looked). */
  readonly among?: readonly Delivery[] | undefined;
}

/** One group's delivery state. The default group is named "". */
export class Group {
  readonly ready: [Deque<Delivery>, Deque<Delivery>, Deque<Delivery>] = [
    new Deque(),
    new Deque(),
    new Deque(),
  ];
  readonly delayed: Heap<Delivery>;
  readonly leases: Heap<LeaseEntry>;
  /** Messages this group still holds, in any state. */
  held = 0;
  readyCount = 0;
  delayedCount = 0;
  inFlightCount = 0;
  /** Deliveries whose payload a filter has examined (the work filtered consumes cost). */
  examined = 0;
  /** Filtered consumers waiting on the group (consumers.ts): while any, fresh deliveries are noted. */
  #watchers = 0;
  /** Deliveries that became ready since takeFresh() was last called. */
  #fresh: Delivery[] = [];
  /** More became ready than a scan window: the watchers scan instead. */
  #freshLost = false;

  /** `onDue` hears a delay or lease end earlier than any the group had (the broker's alarm). */
  constructor(readonly name: string, readonly createdAt: number, onDue?: (at: number) => void) {
    this.delayed = new Heap(onDue);
    this.leases = new Heap(onDue);
  }

  /** Adds a new delivery of `msg`, ready now or delayed until `dueAt`. */
  add(
    msg: StoredMessage,
    retryCount: number,
    dueAt: number,
    now: number,
    reason?: string,
  ): Delivery {
    const d: Delivery = {
      msg,
      group: this,
      state: State.Ready,
      retryCount,
      at: dueAt,
      lease: 0,
      reason,
    };
    msg.attach(d);
    this.held++;
    this.#enqueue(d, now);
    return d;
  }

  #enqueue(d: Delivery, now: number): void {
    if (d.at > now) {
      d.state = State.Delayed;
      this.delayedCount++;
      this.delayed.push(d.at, d);
    } else {
      d.state = State.Ready;
      this.readyCount++;
      this.ready[d.msg.priority]!.push(d);
      if (this.#watchers) this.#noteReady(d);
    }
  }

  #noteReady(d: Delivery): void {
    if (this.#fresh.length < FILTER_SCAN_WINDOW) this.#fresh.push(d);
    else this.#freshLost = true;
  }

  /** Counts a filtered consumer that starts (1) or stops (-1) waiting on the group. */
  watch(delta: 1 | -1): void {
    this.#watchers += delta;
    if (!this.#watchers) this.#dropFresh();
  }

  /**
   * The deliveries that became ready since the last call, for the filtered consumers waiting
   * here to look at (some may have been taken meanwhile); undefined when more than
   * FILTER_SCAN_WINDOW did, and they should take by a scan instead.
   */
  takeFresh(): readonly Delivery[] | undefined {
    if (this.#freshLost) {
      this.#dropFresh();
      return undefined;
    }
    const fresh = this.#fresh;
    if (!fresh.length) return NONE;
    this.#fresh = [];
    return fresh;
  }

  #dropFresh(): void {
    this.#fresh = [];
    this.#freshLost = false;
  }

  /** Ends a delivery whatever its state (ack, expiry, dead-lettering, purge). */
  remove(d: Delivery): void {
    this.#leave(d);
    d.state = State.Done;
    d.msg.detach(d);
    this.held--;
  }

  #leave(d: Delivery): void {
    if (d.state === State.Ready) this.readyCount--;
    else if (d.state === State.Delayed) this.delayedCount--;
    else if (d.state === State.InFlight) this.inFlightCount--;
  }

  /** Puts a delivery back as a fresh entry (requeue, lease end); the old entries go stale. */
  requeue(d: Delivery, retryCount: number, dueAt: number, now: number, reason?: string): Delivery {
    this.remove(d);
    const next = this.add(d.msg, retryCount, dueAt, now, reason ?? d.reason);
    return next;
  }

  /** Leases a ready delivery until `until`. */
  lease(d: Delivery, until: number): void {
    this.#leave(d);
    d.state = State.InFlight;
    d.at = until;
    d.lease++;
    this.inFlightCount++;
    this.leases.push(until, { d, lease: d.lease });
  }

  /** Extends an in-flight lease. */
  touch(d: Delivery, until: number): void {
    d.at = until;
    d.lease++;
    this.leases.push(until, { d, lease: d.lease });
  }

  /**
   * Takes up to `limit` ready deliveries, highest priority first, FIFO within a priority, and
   * stops before the payloads would pass `maxBytes` (the first one is always taken), so one
   * answer stays bounded. `isExpired` lets the topic drop expired messages met on the way.
   * Filtered takes and peeks scan; a filter examines at most FILTER_SCAN_WINDOW deliveries.
   * With `among`, only those deliveries are looked at (takeFresh()).
   */
  take(
    limit: number,
    filter: MessageFilter | undefined,
    isExpired: (d: Delivery) => boolean,
    peek = false,
    maxBytes = Infinity,
    among?: readonly Delivery[],
  ): Delivery[] {
    if (among) return this.#takeAmong(among, limit, filter, isExpired, maxBytes);
    const out: Delivery[] = [];
    let bytes = 0;
    let examined = 0;
    const fits = (d: Delivery) => out.length === 0 || bytes + d.msg.payloadBytes <= maxBytes;
    for (const q of this.ready) {
      for (let i = 0; i < q.length && out.length < limit;) {
        const d = q.at(i)!;
        if (d.state !== State.Ready || isExpired(d)) {
          q.removeAt(i);
          continue;
        }
        if (filter) {
          if (examined === FILTER_SCAN_WINDOW) return out;
          examined++;
          this.examined++;
          if (!filter.accepts(d.msg)) {
            i++;
            continue;
          }
        }
        // Past the budget nothing lower in order may be taken either: priority and FIFO hold.
        if (!fits(d)) return out;
        bytes += d.msg.payloadBytes;
        out.push(d);
        if (peek) i++;
        else q.removeAt(i);
      }
      if (out.length >= limit) break;
    }
    return out;
  }

  /**
   * take() over `among` alone, in the same order. What is taken stays in its FIFO as a stale
   * entry once the caller leases it: ready deliveries are never searched for.
   */
  #takeAmong(
    among: readonly Delivery[],
    limit: number,
    filter: MessageFilter | undefined,
    isExpired: (d: Delivery) => boolean,
    maxBytes: number,
  ): Delivery[] {
    const out: Delivery[] = [];
    let bytes = 0;
    for (let p = 0; p < this.ready.length && out.length < limit; p++) {
      for (const d of among) {
        if (out.length >= limit) break;
        if (d.msg.priority !== p || d.state !== State.Ready || isExpired(d)) continue;
        if (filter) {
          this.examined++;
          if (!filter.accepts(d.msg)) continue;
        }
        if (out.length > 0 && bytes + d.msg.payloadBytes > maxBytes) return out;
        bytes += d.msg.payloadBytes;
        out.push(d);
      }
    }
    return out;
  }

  /**
   * Puts leased deliveries back at the head of their queues, in the order given, without
   * counting an attempt: an answer that could not be handed over. Leases are not durable, so
   * this needs no record. Each comes back as a fresh entry, like a requeue: the old one may
   * still stand stale in its FIFO (#takeAmong).
   */
  unlease(ds: Delivery[]): void {
    for (let i = ds.length - 1; i >= 0; i--) {
      const d = ds[i]!;
      if (d.state !== State.InFlight) continue;
      this.remove(d); // its lease-heap entry goes stale
      const back: Delivery = { ...d, state: State.Ready, at: 0, lease: 0 };
      d.msg.attach(back);
      this.held++;
      this.readyCount++;
      this.ready[d.msg.priority]!.unshift(back);
      if (this.#watchers) this.#noteReady(back);
    }
  }

  /** Moves delayed deliveries whose time has come to ready; returns how many. */
  promoteDue(now: number): number {
    let n = 0;
    while (this.delayed.peekKey() <= now) {
      const d = this.delayed.pop()!;
      if (d.state !== State.Delayed) continue;
      this.delayedCount--;
      d.state = State.Ready;
      this.readyCount++;
      this.ready[d.msg.priority]!.push(d);
      if (this.#watchers) this.#noteReady(d);
      n++;
    }
    return n;
  }

  /**
   * When the group's next delay comes due or (with `leases`) its next lease ends; Infinity when
   * nothing is pending. Entries gone stale at the front of either heap are dropped on the way,
   * so an acked lease or a requeued delay never wakes the broker.
   */
  nextDue(leases: boolean): number {
    const delayed = this.delayed;
    while (delayed.peekKey() < Infinity && delayed.peek()!.state !== State.Delayed) delayed.pop();
    if (!leases) return delayed.peekKey();
    const l = this.leases;
    for (let e = l.peek(); e && (e.d.state !== State.InFlight || e.d.lease !== e.lease);) {
      l.pop();
      e = l.peek();
    }
    return Math.min(delayed.peekKey(), l.peekKey());
  }

  /** Up to `limit` in-flight deliveries, the soonest lease end first (for operators). */
  inFlight(limit: number): Delivery[] {
    const live = this.leases.values().filter((e) =>
      e.d.state === State.InFlight && e.d.lease === e.lease
    );
    return live.sort((a, b) => a.d.at - b.d.at).slice(0, limit).map((e) => e.d);
  }

  /** In-flight deliveries whose lease has ended, removed from the lease heap. */
  endedLeases(now: number): Delivery[] {
    const out: Delivery[] = [];
    while (this.leases.peekKey() <= now) {
      const e = this.leases.pop()!;
      if (e.d.state === State.InFlight && e.d.lease === e.lease) out.push(e.d);
    }
    return out;
  }

  /** Forgets every delivery (purge: the topic drops the messages themselves); consumers stay. */
  clear(): void {
    for (const q of this.ready) q.clear();
    this.#dropFresh();
    this.held = 0;
    this.delayed.clear();
    this.leases.clear();
    this.readyCount = this.delayedCount = this.inFlightCount = 0;
  }
}
