/**
 * @module The consumers waiting on groups, and the one hand-off that serves them. A consumer
 * holds credits (NSQ's RDY count): how many more deliveries it takes now. A long-poll is a
 * one-shot consumer with `limit` credits and a deadline; a push consumer (lib/push/consumer.ts: a webhook
 * pusher, a consuming WebSocket) stays, its credits its limit minus the leases it holds. Publish, requeue, a lease
 * that ends, a delay that comes due and redrive all hand messages out through `deliver()`.
 * Broadcast is an offer to the consumers waiting at that instant: nothing is leased.
 *
 * A filtered consumer is shown what is ready once, when it starts waiting (a scan bounded by
 * FILTER_SCAN_WINDOW); after that only what becomes ready (Group.takeFresh), so a publish costs
 * each parked filtered consumer one message, not the queue. A long-poll on a topic that does not
 * exist yet waits by name, creating nothing, and joins the topic when it is created.
 */

import { MAX_ANSWER_PAYLOAD_BYTES } from "../config.ts";
import type { Group, TakeSpec } from "./group.ts";
import { Heap } from "../heap.ts";
import type { Delivery, MessageFilter, StoredMessage } from "../message.ts";
import type { Topic } from "../topic.ts";

/** What a consumer is handed: a leased (or peeked) delivery, or a broadcast message. */
export interface Offered {
  readonly msg: StoredMessage;
  readonly retryCount: number;
  readonly reason: string | undefined;
}

/** Someone who takes deliveries from one group. */
export interface Consumer {
  readonly group: Group;
  /** Only payloads this accepts are handed over. */
  readonly filter: MessageFilter | undefined;
  /** The lease of what it is handed. */
  readonly visibilityMs: number;
  /** Looks without leasing. */
  readonly peek: boolean;
  /**
   * How many more deliveries it takes now; 0 parks it until it is served again. The consumer
   * keeps the count (lib/push/consumer.ts): the pipeline only reads it.
   */
  readonly credits: number;
  /** When it stops waiting (Infinity: until it leaves). */
  readonly deadline: number;
  /** A one-shot consumer (a long-poll) leaves after its first offer. */
  readonly once: boolean;
  /** Receives deliveries (leased unless `peek`), or with `ephemeral` a broadcast. */
  offer(items: Offered[], ephemeral: boolean): void;
  /** Told once, when it is removed without having been served (timeout, drain, deletion). */
  close(): void;
}

/** What a long-poll got: deliveries, or a broadcast message that needs no ack. */
export interface Taken {
  items: Offered[];
  ephemeral: boolean;
}

/** Takes (leases, unless peeking) up to `spec.limit` ready deliveries of `g`: deliveries.ts. */
export type TakeFn = (
  topic: Topic,
  g: Group,
  spec: TakeSpec,
  now: number,
  maxBytes: number,
) => Delivery[];

interface Waiting {
  topic: Topic;
  consumer: Consumer;
  /** Served or removed: its deadline entry is stale. */
  left: boolean;
  /** It has been shown what was ready; from then on a filtered one sees only what comes. */
  looked: boolean;
}

/** A long-poll waiting for a topic that does not exist yet. */
interface Unborn {
  readonly name: string;
  /** Only payloads this accepts are offered (a broadcast). */
  readonly filter: MessageFilter | undefined;
  /** Hands it a broadcast message. */
  offer(item: Offered): void;
  /** Moves it onto the topic just created with its name. */
  join(topic: Topic, now: number): void;
  /** Ends it with nothing (its deadline, a drain). */
  close(): void;
  /** Joined or removed: its deadline entry is stale. */
  left: boolean;
}

/** What a long-poll asks for. */
export type WaitSpec = Pick<Consumer, "filter" | "visibilityMs" | "peek"> & { limit: number };

const NOTHING: Taken = { items: [], ephemeral: false };

/** Every consumer waiting on every group of the broker. */
export class Consumers {
  readonly #waiting = new Map<Group, Waiting[]>();
  /** Long-polls by the name of the topic they wait for, which does not exist yet. */
  readonly #unborn = new Map<string, Unborn[]>();
  readonly #deadlines: Heap<Waiting | Unborn>;

  /** `onDue` hears a wait's deadline earlier than any pending (the broker's alarm). */
  constructor(private readonly take: TakeFn, onDue?: (at: number) => void) {
    this.#deadlines = new Heap(onDue);
  }

  /** When the next wait ends (Infinity: none); deadlines of served waits are dropped. */
  nextDeadline(): number {
    const heap = this.#deadlines;
    for (let w = heap.peek(); w?.left;) {
      heap.pop();
      w = heap.peek();
    }
    return heap.peekKey();
  }

  /** Whether any consumer waits on `g` (the sweep skips groups nobody waits on). */
  waitingOn(g: Group): boolean {
    return (this.#waiting.get(g)?.length ?? 0) > 0;
  }

  /** How many consumers wait on the groups of `topic`. */
  count(topic: Topic): number {
    let n = 0;
    for (const g of topic.groups.values()) n += this.#waiting.get(g)?.length ?? 0;
    return n;
  }

  /** How many long-polls wait for topic `name`, which does not exist yet. */
  waitingFor(name: string): number {
    return this.#unborn.get(name)?.length ?? 0;
  }

  /**
   * Adds a consumer and serves it from what is ready now; returns a function that removes it.
   * With `looked`, the caller has just taken from the group in this same turn and found nothing
   * for it, so a filtered consumer is not shown the queue a second time.
   */
  add(topic: Topic, consumer: Consumer, now: number, looked = false): () => void {
    const w: Waiting = { topic, consumer, left: false, looked };
    const list = this.#waiting.get(consumer.group);
    if (list) list.push(w);
    else this.#waiting.set(consumer.group, [w]);
    if (consumer.filter) consumer.group.watch(1);
    if (consumer.deadline !== Infinity) this.#deadlines.push(consumer.deadline, w);
    this.deliver(topic, consumer.group, now);
    w.looked = true;
    return () => this.#remove(w);
  }

  /**
   * Parks a long-poll that has just found nothing in `g` until something is handed to it,
   * `deadline` passes (empty answer) or `signal` aborts (it leaves the queue).
   */
  wait(
    topic: Topic,
    g: Group,
    spec: WaitSpec,
    deadline: number,
    now: number,
    signal: AbortSignal | undefined,
  ): Promise<Taken> {
    if (signal?.aborted) return Promise.resolve(NOTHING);
    return new Promise((resolve) => {
      const settle = this.#settler(resolve, signal, () => remove());
      const remove = this.#park(topic, g, spec, deadline, now, settle);
    });
  }

  /**
   * Parks a long-poll on topic `name`, which does not exist: nothing is created. When a publish
   * or POST /api/topics creates the topic, `join` names the group (created then, before the
   * first message) and the spec, and the poll waits there as `wait()` does, until `deadline`.
   */
  waitForTopic(
    name: string,
    filter: MessageFilter | undefined,
    join: (topic: Topic) => { group: Group; spec: WaitSpec },
    deadline: number,
    signal: AbortSignal | undefined,
  ): Promise<Taken> {
    if (signal?.aborted) return Promise.resolve(NOTHING);
    return new Promise((resolve) => {
      let remove = () => {
        this.#forget(u);
      };
      const settle = this.#settler(resolve, signal, () => remove());
      const u: Unborn = {
        name,
        filter,
        left: false,
        offer: (item) => settle({ items: [item], ephemeral: true }),
        join: (topic, at) => {
          const { group, spec } = join(topic);
          remove = this.#park(topic, group, spec, deadline, at, settle);
        },
        close: () => settle(NOTHING),
      };
      const list = this.#unborn.get(name);
      if (list) list.push(u);
      else this.#unborn.set(name, [u]);
      this.#deadlines.push(deadline, u);
    });
  }

  /** Moves the long-polls waiting for `topic`'s name onto it, now that it exists. */
  adopt(topic: Topic, now: number): void {
    const list = this.#unborn.get(topic.name);
    if (!list) return;
    this.#unborn.delete(topic.name);
    for (const u of list) {
      u.left = true;
      try {
        u.join(topic, now);
      } catch {
        u.close(); // the topic cannot take its group: the poll ends empty, the publish goes on
      }
    }
  }

  /** A long-poll's resolver: it resolves once, and an abort first runs `remove`. */
  #settler(
    resolve: (taken: Taken) => void,
    signal: AbortSignal | undefined,
    remove: () => void,
  ): (taken: Taken) => void {
    const onAbort = () => {
      remove();
      resolve(NOTHING);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    return (taken) => {
      signal?.removeEventListener("abort", onAbort);
      resolve(taken);
    };
  }

  /** Adds a one-shot consumer of `g` that settles the poll; returns its remover. */
  #park(
    topic: Topic,
    g: Group,
    spec: WaitSpec,
    deadline: number,
    now: number,
    settle: (taken: Taken) => void,
  ): () => void {
    const consumer: Consumer = {
      group: g,
      filter: spec.filter,
      visibilityMs: spec.visibilityMs,
      peek: spec.peek,
      credits: spec.limit,
      deadline,
      once: true,
      offer: (items, ephemeral) => settle({ items, ephemeral }),
      close: () => settle(NOTHING),
    };
    return this.add(topic, consumer, now, true);
  }

  /** Hands what `g` has ready to its waiting consumers, in the order they came, by their credits. */
  deliver(topic: Topic, g: Group, now: number): void {
    const list = this.#waiting.get(g);
    if (!list) return;
    // What filtered consumers that have looked are shown (undefined: too much came, they scan).
    const fresh = g.takeFresh();
    let served = true;
    // A peeking consumer that stays takes nothing away: it is shown what is ready once a call.
    let peeked: Set<Consumer> | undefined;
    while (served && g.readyCount > 0 && list.length) {
      served = false;
      for (let i = 0; i < list.length && g.readyCount > 0; i++) {
        const w = list[i]!;
        const c = w.consumer;
        if (c.credits <= 0 || peeked?.has(c)) continue;
        const spec: TakeSpec = {
          limit: c.credits,
          filter: c.filter,
          peek: c.peek,
          visibilityMs: c.visibilityMs,
          among: c.filter && w.looked ? fresh : undefined,
        };
        const taken = this.take(topic, g, spec, now, MAX_ANSWER_PAYLOAD_BYTES);
        if (!taken.length) continue;
        served = true;
        if (c.once) this.#left(list.splice(i--, 1)[0]!);
        else if (c.peek) (peeked ??= new Set()).add(c);
        c.offer(taken, false);
      }
    }
    if (!list.length) this.#waiting.delete(g);
  }

  /** Hands what every group of `topic` has ready to the consumers waiting on it. */
  deliverAll(topic: Topic, now: number): void {
    for (const g of topic.groups.values()) if (this.#waiting.has(g)) this.deliver(topic, g, now);
  }

  /**
   * Offers a broadcast message to every consumer of topic `name` waiting at this instant (on
   * `topic`, or for it when it does not exist) whose filter takes it; nothing is leased and no
   * credit spent. Returns how many received it.
   */
  broadcast(name: string, topic: Topic | undefined, msg: StoredMessage): number {
    const item: Offered = { msg, retryCount: 0, reason: undefined };
    let n = 0;
    const unborn = this.#unborn.get(name);
    if (unborn) {
      for (const u of [...unborn]) {
        if (u.filter && !u.filter.accepts(msg)) continue;
        this.#forget(u);
        u.offer(item);
        n++;
      }
    }
    for (const g of topic?.groups.values() ?? []) {
      const list = this.#waiting.get(g);
      if (!list) continue;
      for (let i = 0; i < list.length; i++) {
        const c = list[i]!.consumer;
        if (c.filter && !c.filter.accepts(msg)) continue;
        if (c.once) this.#left(list.splice(i--, 1)[0]!);
        c.offer([item], true);
        n++;
      }
      if (!list.length) this.#waiting.delete(g);
    }
    return n;
  }

  /** Ends the waits whose deadline has passed (with nothing). */
  expire(now: number): void {
    while (this.#deadlines.peekKey() <= now) {
      const w = this.#deadlines.pop()!;
      if ("join" in w) {
        if (this.#forget(w)) w.close();
      } else if (this.#remove(w)) w.consumer.close();
    }
  }

  /** Removes every consumer of `topic` (deletion), telling each. */
  release(topic: Topic): void {
    for (const g of topic.groups.values()) {
      const list = this.#waiting.get(g);
      if (!list) continue;
      this.#waiting.delete(g);
      for (const w of list) {
        this.#left(w);
        w.consumer.close();
      }
    }
  }

  /** Removes every consumer and every long-poll waiting for a topic (drain, close), telling each. */
  releaseAll(): void {
    const lists = [...this.#waiting.values()];
    this.#waiting.clear();
    for (const w of lists.flat()) {
      this.#left(w);
      w.consumer.close();
    }
    const unborn = [...this.#unborn.values()];
    this.#unborn.clear();
    for (const u of unborn.flat()) {
      u.left = true;
      u.close();
    }
  }

  /** Takes a consumer out of its group's list; false when it had left already. */
  #remove(w: Waiting): boolean {
    const list = this.#waiting.get(w.consumer.group);
    const i = list ? list.indexOf(w) : -1;
    if (i < 0) return false;
    list!.splice(i, 1);
    this.#left(w);
    if (!list!.length) this.#waiting.delete(w.consumer.group);
    return true;
  }

  /** Marks a consumer taken out of its list. */
  #left(w: Waiting): void {
    w.left = true;
    if (w.consumer.filter) w.consumer.group.watch(-1);
  }

  /** Takes a long-poll out of those waiting for a topic; false when it had left already. */
  #forget(u: Unborn): boolean {
    const list = this.#unborn.get(u.name);
    const i = list ? list.indexOf(u) : -1;
    if (i < 0) return false;
    list!.splice(i, 1);
    u.left = true;
    if (!list!.length) this.#unborn.delete(u.name);
    return true;
  }
}
