/**
 * @module The durable feed and who listens to it. The WAL calls `durable()` right after each
 * batch is on disk, in the order batches became durable across topics; subscribers hear the
 * messages in it (publishes, dead-letter moves, redrives: every PUBLISH record), matched by
 * pattern (`orders`, `orders.*`, `*`, so topics created later match too), and broadcasts,
 * which are never stored. Nothing is heard before it is durable, so no one holds an event that
 * a crash erases.
 *
 * A reader that reconnects with the last sequence number it saw (`afterSeq`) gets what it
 * missed, in order and once, then the live events. A topic that anyone has streamed keeps its
 * last BROKER_STREAM_BUFFER messages (and at most STREAM_BUFFER_MAX_BYTES of payload in memory)
 * in a ring, which serves a recent resume point; an older one (or any, after a restart) is
 * served from what the topic holds: every held message stored after it, up to the last one the
 * feed has heard (`Topic.durableSeq`; later ones come live). A `gap` event comes first when a
 * message stored after it has left the topic (lib/departures.ts), with how many when known.
 * Each subscriber has its own bounded queue: one that throws or falls further behind than the
 * buffer is dropped and told, and never holds up the WAL or anyone else.
 */

import { Deque } from "./deque.ts";
import { BrokerError } from "./errors.ts";
import type { Logger } from "./log.ts";
import { StoredMessage } from "./message.ts";
import { checkName } from "./names.ts";
import { prefetchPayloads } from "./memory/payload_file.ts";
import type { Topic } from "./topic.ts";
import { RecordType, type WalRecord } from "./storage/record.ts";

/** Payload bytes in memory a topic's resume ring may keep, whatever BROKER_STREAM_BUFFER says. */
export const STREAM_BUFFER_MAX_BYTES = 32 * 1024 * 1024;

/** A stored message as the feed tells it: its topic's sequence number is its event id. */
export interface FeedMessage {
  kind: "message";
  topic: string;
  /** The sequence number of the record that stored it in `topic`; it only grows. */
  seq: number;
  msg: StoredMessage;
  retryCount: number;
  reason: string | undefined;
  /** The group a dead-lettered message came from. */
  origin: string | undefined;
}

/** What a subscriber hears. */
export type FeedEvent =
  | FeedMessage
  /** A broadcast: never stored, so it has no sequence number. */
  | { kind: "broadcast"; topic: string; msg: StoredMessage }
  /**
   * The messages after `afterSeq` are no longer all held: the reader missed some, `missed` of
   * them when that number is known.
   */
  | { kind: "gap"; topic: string; afterSeq: number; missed?: number }
  /** The last event: the subscriber was removed (it threw, or fell too far behind). */
  | { kind: "dropped"; reason: string }
  /** The last event: the broker is draining or closing; nothing more will come. */
  | { kind: "closed" };

/**
 * Ends a subscription. Across workers (lib/remote_broker.ts) it also says, in `ready`, when every
 * worker's feed listens; a subscription here listens at once.
 */
export type Unsubscribe = (() => void) & { ready?: Promise<unknown> };

/** A subscriber's handler; a returned promise holds its next events until it settles. */
export type Listener = (event: FeedEvent) => void | Promise<void>;

export interface SubscribeOptions {
  /** Replays first the messages after this sequence number: from the ring, or what is held. */
  afterSeq?: number;
  /** Events that may wait for the listener; past it, it is dropped (default: the buffer size). */
  maxQueue?: number;
}

interface Subscription {
  /** The exact topic, or the prefix before a trailing `*`. */
  readonly match: string;
  readonly prefix: boolean;
  readonly fn: Listener;
  readonly max: number;
  readonly queue: Deque<FeedEvent>;
  /** Events of a resume served before the queue, one at a time as the listener takes them. */
  backlog: Iterator<FeedEvent> | undefined;
  busy: boolean;
  closed: boolean;
}

/** Held messages a resume reads the payloads of with one read, where they lie close together. */
const PREFETCH_MESSAGES = 64;

/** One topic's recent messages, for resume. */
class Ring {
  entries = new Deque<FeedMessage>();
  bytes = 0;
  /** Every message with a sequence number above this is in the ring (or still to come). */
  constructor(public from: number) {}

  push(e: FeedMessage, size: number): void {
    this.entries.push(e);
    this.bytes += inMemory(e);
    while (this.entries.length > size || this.bytes > STREAM_BUFFER_MAX_BYTES) {
      const old = this.entries.shift()!;
      this.bytes -= inMemory(old);
      this.from = Math.max(this.from, old.seq);
    }
  }

  /**
   * Puts `older`, every message stored in (`from`, this.from] (none of them has left the topic),
   * before what the ring holds, as far as it has room: later resumes from there need no walk.
   */
  backfill(older: FeedMessage[], from: number, size: number): void {
    const room = size - this.entries.length;
    if (room <= 0 || !older.length) return;
    const kept = older.length > room ? older.slice(-room) : older;
    let bytes = 0;
    for (const e of kept) bytes += inMemory(e);
    if (this.bytes + bytes > STREAM_BUFFER_MAX_BYTES) return;
    const entries = new Deque<FeedMessage>();
    for (const e of kept) entries.push(e);
    for (let i = 0; i < this.entries.length; i++) entries.push(this.entries.at(i)!);
    this.entries = entries;
    this.bytes += bytes;
    this.from = kept === older ? from : older[older.length - room - 1]!.seq;
  }

  /** The messages after `seq`, or undefined when some of them are no longer here. */
  after(seq: number): FeedMessage[] | undefined {
    if (seq < this.from) return undefined;
    const out: FeedMessage[] = [];
    for (let i = 0; i < this.entries.length; i++) {
      const e = this.entries.at(i)!;
      if (e.seq > seq) out.push(e);
    }
    return out;
  }
}

function inMemory(e: FeedMessage): number {
  return e.msg.onDisk ? 0 : e.msg.payloadBytes;
}

/** Checks a pattern: a topic name, `prefix*` or `*`. */
export function checkPattern(pattern: string): string {
  if (pattern === "*") return pattern;
  if (pattern.endsWith("*")) {
    const prefix = pattern.slice(0, -1);
    if (!/^[A-Za-z0-9._-]{1,200}$/.test(prefix) || prefix.startsWith(".")) {
      throw new BrokerError(
        "invalid_name",
        `Invalid pattern "${pattern.slice(0, 64)}": use a topic name, "prefix*" or "*"`,
      );
    }
    return pattern;
  }
  return checkName(pattern, "topic");
}

/** The durable feed: the broker's subscribers and the topics' resume rings. */
export class Feed {
  readonly #exact = new Map<string, Set<Subscription>>();
  readonly #prefixed = new Set<Subscription>();
  readonly #rings = new Map<string, Ring>();
  /** Subscribers with events waiting to be served in the next microtask. */
  #ready: Subscription[] = [];

  constructor(
    /** BROKER_STREAM_BUFFER: messages a streamed topic keeps. */
    private readonly bufferSize: number,
    private readonly findTopic: (name: string) => Topic | undefined,
    private readonly log: Logger,
  ) {}

  /**
   * Subscribes to a topic name, `prefix*` or `*`; returns the function that unsubscribes. With
   * `afterSeq` (a topic name only), the listener first hears what the ring holds after it, or a
   * `gap` event.
   */
  subscribe(pattern: string, fn: Listener, opts: SubscribeOptions = {}): Unsubscribe {
    checkPattern(pattern);
    const prefix = pattern.endsWith("*");
    if (prefix && opts.afterSeq !== undefined) {
      throw new BrokerError("invalid_parameter", "Resuming needs one topic, not a pattern");
    }
    const sub: Subscription = {
      match: prefix ? pattern.slice(0, -1) : pattern,
      prefix,
      fn,
      max: Math.max(opts.maxQueue ?? this.bufferSize, 1),
      queue: new Deque(),
      backlog: undefined,
      busy: false,
      closed: false,
    };
    if (prefix) this.#prefixed.add(sub);
    else {
      const set = this.#exact.get(pattern);
      if (set) set.add(sub);
      else this.#exact.set(pattern, new Set([sub]));
      const ring = this.#ring(pattern, this.findTopic(pattern)?.seq ?? 0);
      if (opts.afterSeq !== undefined) this.#resume(sub, pattern, ring, opts.afterSeq);
    }
    return () => this.#remove(sub);
  }

  /** Gives a new subscriber what was stored in `topic` after `after`, before any live event. */
  #resume(sub: Subscription, topic: string, ring: Ring, after: number): void {
    const t = this.findTopic(topic);
    if (!t || after > t.seq) {
      // A number this topic never reached: not ours to resume from.
      if (after > 0) this.#push(sub, { kind: "gap", topic, afterSeq: after });
      return;
    }
    const recent = ring.after(after);
    if (recent) {
      for (const e of recent) this.#push(sub, e);
      return;
    }
    const upTo = t.durableSeq;
    const missed = t.departed.between(after, upTo);
    const gap: FeedEvent | undefined = missed === 0
      ? undefined
      : missed === undefined
      ? { kind: "gap", topic, afterSeq: after }
      : { kind: "gap", topic, afterSeq: after, missed };
    // One walk over what the topic holds; its messages are in the order they were stored, except
    // one a later move joined (its sequence number grew).
    const held: StoredMessage[] = [];
    let sorted = true;
    if (after < upTo) {
      for (const msg of t.messages.values()) {
        if (msg.seq <= after || msg.seq > upTo) continue;
        if (held.length && msg.seq < held[held.length - 1]!.seq) sorted = false;
        held.push(msg);
      }
    }
    if (!sorted) held.sort((a, b) => a.seq - b.seq);
    if (!gap && !held.length) return;
    const events: (FeedMessage | undefined)[] = new Array(held.length);
    if (!gap) {
      // Nothing after `after` has left: the ring can hold (after, ring.from] from now on, so the
      // readers that come back with the same id after a restart do not each walk the topic.
      let n = held.length;
      while (n > 0 && held[n - 1]!.seq > ring.from) n--;
      const older: FeedMessage[] = [];
      for (let i = Math.max(0, n - this.bufferSize); i < n; i++) {
        older.push(events[i] = feedMessage(topic, held[i]!, held[i]!.seq));
      }
      if (n > 0) ring.backfill(older, after, this.bufferSize);
    }
    sub.backlog = replay(topic, gap, held, held.map((m) => m.seq), events);
    sub.busy = true;
    if (this.#ready.push(sub) === 1) queueMicrotask(() => this.#serveReady());
  }

  /** How many subscribers a topic name would reach. */
  count(topic: string): number {
    let n = this.#exact.get(topic)?.size ?? 0;
    for (const s of this.#prefixed) if (topic.startsWith(s.match)) n++;
    return n;
  }

  /** The WAL's durable hook for `topic`: records just became durable, in order. */
  durable(topic: string, records: readonly WalRecord[]): void {
    const t = this.findTopic(topic);
    const last = records.at(-1); // records come in order: the last has the highest seq
    if (t && last && last.seq > t.durableSeq) t.durableSeq = last.seq;
    let ring = this.#rings.get(topic);
    let subs: Subscription[] | undefined;
    for (const r of records) {
      if (r.type !== RecordType.Publish) continue;
      subs ??= this.#matching(topic);
      if (!subs.length && !ring) return;
      const event: FeedMessage = {
        kind: "message",
        topic,
        seq: r.seq,
        // The held message when there is one (its payload may move to disk), else a copy.
        msg: t?.messages.get(r.id) ?? new StoredMessage(r, 0),
        retryCount: r.deliveries?.[0]?.retryCount ?? 0,
        reason: r.reason,
        origin: r.origin,
      };
      ring ??= this.#ring(topic, r.seq - 1);
      ring.push(event, this.bufferSize);
      for (const s of subs) this.#push(s, event);
    }
  }

  /** Tells the subscribers of `topic` about a broadcast; returns how many heard it. */
  broadcast(topic: string, msg: StoredMessage): number {
    const subs = this.#matching(topic);
    const event: FeedEvent = { kind: "broadcast", topic, msg };
    for (const s of subs) this.#push(s, event);
    return subs.length;
  }

  /** Ends every subscription (drain, close): each hears a last `closed` event. */
  closeAll(): void {
    const all = [...this.#prefixed, ...[...this.#exact.values()].flatMap((set) => [...set])];
    for (const sub of all) {
      this.#remove(sub);
      queueMicrotask(() => {
        try {
          sub.fn({ kind: "closed" });
        } catch { /* it is gone already */ }
      });
    }
  }

  /** Forgets a deleted topic's ring (its sequence numbers start again). */
  forget(topic: string): void {
    this.#rings.delete(topic);
  }

  #ring(topic: string, from: number): Ring {
    let ring = this.#rings.get(topic);
    if (!ring) this.#rings.set(topic, ring = new Ring(from));
    return ring;
  }

  #matching(topic: string): Subscription[] {
    const out = [...this.#exact.get(topic) ?? []];
    for (const s of this.#prefixed) if (topic.startsWith(s.match)) out.push(s);
    return out;
  }

  #push(sub: Subscription, e: FeedEvent): void {
    if (sub.closed) return;
    if (sub.queue.length >= sub.max) {
      return this.#drop(sub, `fell behind: ${sub.queue.length} events waiting`);
    }
    sub.queue.push(e);
    if (sub.busy) return;
    sub.busy = true;
    // One microtask serves every subscriber that has news, outside the WAL's hook.
    if (this.#ready.push(sub) === 1) queueMicrotask(() => this.#serveReady());
  }

  #serveReady(): void {
    const ready = this.#ready;
    this.#ready = [];
    for (const sub of ready) this.#serve(sub);
  }

  /**
   * Hands a subscriber its queue in order. A listener that returns a promise holds its next
   * events until the promise settles; the others are served in one synchronous run.
   */
  #serve(sub: Subscription): void {
    while (!sub.closed) {
      let e: FeedEvent | undefined;
      if (sub.backlog) {
        const next = sub.backlog.next();
        if (next.done) sub.backlog = undefined;
        else e = next.value;
      }
      e ??= sub.queue.shift();
      if (!e) break;
      try {
        const done = sub.fn(e);
        if (done) {
          done.then(() => this.#serve(sub), (err) => this.#failed(sub, err));
          return;
        }
      } catch (err) {
        this.#failed(sub, err);
      }
    }
    sub.busy = false;
  }

  #failed(sub: Subscription, err: unknown): void {
    this.log.warn("subscriber failed; dropped", { error: err });
    this.#drop(sub, `the subscriber failed: ${(err as Error)?.message ?? err}`);
  }

  #drop(sub: Subscription, reason: string): void {
    if (sub.closed) return;
    this.#remove(sub);
    queueMicrotask(() => {
      try {
        sub.fn({ kind: "dropped", reason });
      } catch { /* it is gone already */ }
    });
  }

  #remove(sub: Subscription): void {
    sub.closed = true;
    sub.queue.clear();
    sub.backlog = undefined;
    if (sub.prefix) this.#prefixed.delete(sub);
    else {
      const set = this.#exact.get(sub.match);
      set?.delete(sub);
      if (set?.size === 0) this.#exact.delete(sub.match);
    }
  }
}

/**
 * A resume's events from what the topic held when it began: the gap, if any, then each message
 * (as it is when served: a held message may have been acked since, and is still sent).
 */
function* replay(
  topic: string,
  gap: FeedEvent | undefined,
  held: StoredMessage[],
  seqs: number[],
  built: (FeedMessage | undefined)[],
): Generator<FeedEvent> {
  if (gap) yield gap;
  for (let i = 0; i < held.length; i++) {
    if (i % PREFETCH_MESSAGES === 0) prefetchPayloads(held.slice(i, i + PREFETCH_MESSAGES));
    yield built[i] ?? feedMessage(topic, held[i]!, seqs[i]!);
  }
}

/** A held message as the feed tells it, as it is now. */
function feedMessage(topic: string, msg: StoredMessage, seq: number): FeedMessage {
  return {
    kind: "message",
    topic,
    seq,
    msg,
    retryCount: msg.first?.retryCount ?? 0,
    reason: msg.reason,
    origin: msg.origin,
  };
}
