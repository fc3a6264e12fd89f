/**
 * @module One topic: its messages (stored once), its groups' delivery state, its idempotency
 * keys and its WAL. Every durable change goes through a record and `apply()`, which replay
 * uses too, so live state and recovered state cannot drift.
 */

import { DLQ_SUFFIX } from "./config.ts";
import { Departures } from "./departures.ts";
import { BrokerError } from "./errors.ts";
import { Group } from "./delivery/group.ts";
import { Heap } from "./heap.ts";
import { IdempotencyKeys, type SeenKey } from "./idempotency.ts";
import { MemoryBudget } from "./memory/budget.ts";
import { type Delivery, type PayloadLocation, State, StoredMessage } from "./message.ts";
import { prefetchPayloads } from "./memory/payload_file.ts";
import type { Wal } from "./storage/wal.ts";
import type { Policy } from "../protocol/wire.ts";
import {
  encodeRecord,
  FILE_HEADER_BYTES,
  type MetaRecord,
  type PublishRecord,
  RecordType,
  type WalRecord,
  type WebhookRecord,
} from "./storage/record.ts";

/**
 * A topic's own settings: the fields of its META record (lib/storage/record.ts) but the record's
 * own. 0 means "the broker default"; `maxBytes` counts payload + overhead of each message.
 */
export type TopicSettings = Omit<MetaRecord, "type" | "seq" | "goneSeq">;

/** What a topic may be created with; unset means "the broker default". */
export interface TopicOptions {
  policy?: Policy;
  retainMs?: number;
  visibilityMs?: number;
  maxMessages?: number;
  maxBytes?: number;
}

/** The settings a topic created at `now` with `opts` keeps in its META record. */
export function topicSettings(opts: TopicOptions, now: number): TopicSettings {
  return {
    policy: opts.policy ?? "reject",
    retainMs: opts.retainMs ?? 0,
    visibilityMs: opts.visibilityMs ?? 0,
    maxMessages: opts.maxMessages ?? 0,
    maxBytes: opts.maxBytes ?? 0,
    createdAt: now,
  };
}

/** Counters since start-up, for /api/stats and /metrics. */
export interface TopicCounters {
  published: number;
  delivered: number;
  acked: number;
  requeued: number;
  deadLettered: number;
  expired: number;
  /** Publishes refused because the topic was at its cap (reject policy). */
  rejectedQueueFull: number;
  /** Publishes refused because the broker was at its memory budget. */
  rejectedMemoryFull: number;
}

/** A fresh set of counters. */
export function zeroCounters(): TopicCounters {
  return {
    published: 0,
    delivered: 0,
    acked: 0,
    requeued: 0,
    deadLettered: 0,
    expired: 0,
    rejectedQueueFull: 0,
    rejectedMemoryFull: 0,
  };
}

/** The groups of two dead-letter moves of one message (undefined: the default group). */
export function mergeOrigins(a: string | undefined, b: string | undefined): string | undefined {
  if (a === b) return a;
  const names = new Set([...(a ?? "").split(","), ...(b ?? "").split(",")]);
  return [...names].join(",");
}

/** The groups a dead letter returns to on redrive; undefined: every group of the topic. */
export function originGroups(origin: string | undefined): string[] | undefined {
  return origin === undefined ? undefined : origin.split(",");
}

/** A registered webhook, as its WEBHOOK record keeps it. */
export interface WebhookSpec {
  id: string;
  url: string;
  /** "" unless it came from a record written before secrets were sealed: the plain secret. */
  secret: string;
  /** The secret, sealed (lib/push/secret_box.ts); absent when unsigned. */
  sealedSecret?: Uint8Array;
  createdAt: number;
  /** Bytes of the WEBHOOK record that stands for it in the WAL. */
  frameBytes: number;
}

const WEBHOOK_GROUP_PREFIX = "webhook:";
/** Messages whose payloads a snapshot reads from the file with one read, where it can. */
const PREFETCH_MESSAGES = 256;

/** The group of webhook `id`: a name no client can give a group (":" is not allowed). */
export function webhookGroup(id: string): string {
  return WEBHOOK_GROUP_PREFIX + id;
}

/** Whether a group belongs to a webhook. */
export function isWebhookGroup(name: string): boolean {
  return name.startsWith(WEBHOOK_GROUP_PREFIX);
}

/** The default group's name. */
export const DEFAULT_GROUP = "";

/**
 * The refusal of `action` on `topic` once its log has failed (docs/operating.md, "Disk"): what
 * the log cannot record must not change the topic. The OS's words only, not the file's path.
 */
export function logFailedError(action: string, topic: string, cause: Error): BrokerError {
  const reason = /^.*?\(os error \d+\)/.exec(cause.message)?.[0] ?? cause.message;
  return new BrokerError(
    "storage_failed",
    `Cannot ${action} "${topic}": its log failed (${reason}); ` +
      "the broker needs a restart on a healthy disk",
  );
}

/** A topic as routes/ see it (lib/api.ts): its name and settings, nothing that changes it. */
export type TopicView = Pick<Topic, "name" | "settings">;

export class Topic {
  /** Sequence number of the last record applied. */
  seq = 0;
  /**
   * Sequence number of the last record the durable feed has heard (at start-up, the last one
   * replayed): a resuming stream sends held messages up to it, and the feed the ones after.
   */
  durableSeq = 0;
  /** What has left the topic, so a resuming stream knows what it missed. */
  readonly departed = new Departures();
  readonly messages = new Map<string, StoredMessage>();
  readonly groups = new Map<string, Group>();
  /** Registered webhooks by id; each has its own group (webhookGroup(id)). */
  readonly webhooks = new Map<string, WebhookSpec>();
  /**
   * Hears each deadline earlier than any the topic had (a TTL, a delay, a lease end): the
   * broker sets it to its alarm's request.
   */
  wake: (at: number) => void = () => {};
  /** Passes deadlines on to whatever `wake` is now. */
  readonly #onDue = (at: number): void => this.wake(at);
  readonly expiry = new Heap<StoredMessage>(this.#onDue);
  /** Idempotency keys in publish order, for their window. */
  readonly keys = new IdempotencyKeys((bytes) => this.#hold(bytes));
  /** WAL bytes of the records that still matter (META, groups, messages held, keys). */
  liveBytes = 0;
  /** Bytes of the META record that counts in liveBytes. */
  #metaBytes = 0;
  /** What its messages hold against the memory budget (overhead each, and payloads in memory). */
  heldBytes = 0;
  /** What its messages count toward max_bytes (payload + overhead each, wherever the payload is). */
  storedBytes = 0;
  /** Payload offsets of the snapshot being written: its messages, and offsets in the new file. */
  #relocated: StoredMessage[] = [];
  #relocatedAt: number[] = [];
  /** The WAL generation the snapshot's offsets belong to. */
  #relocationGeneration = -1;
  /** The message the last PUBLISH applied created or joined. */
  #applied: StoredMessage | undefined;
  readonly counters: TopicCounters = zeroCounters();
  readonly isDeadLetter: boolean;

  constructor(
    readonly name: string,
    public settings: TopicSettings,
    public wal: Wal,
    public memory: MemoryBudget = new MemoryBudget(Infinity),
    /** Payloads this large or larger are read from the WAL file, not kept in memory. */
    readonly diskPayloadMin = Infinity,
  ) {
    this.isDeadLetter = name.endsWith(DLQ_SUFFIX);
    this.groups.set(DEFAULT_GROUP, new Group(DEFAULT_GROUP, settings.createdAt, this.#onDue));
  }

  get defaultGroup(): Group {
    return this.groups.get(DEFAULT_GROUP)!;
  }

  /** The next record's sequence number; records are numbered in the order they are written. */
  nextSeq(): number {
    return this.seq + 1;
  }

  /** Throws storage_failed (logFailedError) once the topic's log has failed. */
  assertIntact(action: string): void {
    const failed = this.wal.failed;
    if (failed) throw logFailedError(action, this.name, failed);
  }

  /**
   * Encodes, appends and applies a record; resolves when it is durable. With `after`, the record
   * reaches disk only once `after` has (see Wal.append). Once the log has failed, nothing is
   * applied and the answer rejects with storage_failed; a new message whose batch then fails
   * the log leaves the topic again, so it is not delivered from memory alone.
   */
  commit(record: WalRecord, now: number, after?: Promise<unknown>): Promise<void> {
    // As nats-server's filestore does: the sticky error first, before any change of state.
    const failed = this.wal.failed;
    if (failed) {
      const refused = Promise.reject(logFailedError("write to", this.name, failed));
      refused.catch(() => {}); // callers that never await must not crash the process
      return refused;
    }
    const generation = this.wal.generation;
    const { durable, size, payloadOffset } = this.wal.append(record, after);
    this.#applied = undefined;
    this.apply(record, now, size);
    const msg = this.#applied as StoredMessage | undefined; // set by the apply() of a PUBLISH
    const fresh = record.type === RecordType.Publish && !record.merge ? msg : undefined;
    const answer = durable.catch((e) => this.#refused(e, fresh));
    answer.catch(() => {}); // as Wal.append's: callers that never await must not crash the process
    if (
      msg && !msg.onDisk && payloadOffset !== undefined && record.type === RecordType.Publish &&
      (this.memory.cache.bounded || record.payload.length >= this.diskPayloadMin)
    ) {
      // Once durable, the payload is in the file too, at payloadOffset of this generation.
      durable.then(() => this.#durable(msg, generation, payloadOffset), () => {});
    }
    return answer;
  }

  /**
   * A message's record is on disk: a large payload is read from there from now on; a small one
   * stays in memory while the payload cache has room for it.
   */
  #durable(msg: StoredMessage, generation: number, offset: number): void {
    if (msg.pending === 0 || msg.onDisk || msg.file) return;
    const at = this.wal.locate(generation, offset);
    if (!at) return; // no file (`:memory:`), or a compaction left it elsewhere: keep it
    if (msg.payloadBytes >= this.diskPayloadMin) return this.#move(msg, at);
    msg.locate(at);
    this.memory.cache.add(this, msg);
  }

  /**
   * A record did not become durable. When the log failed, the appender hears storage_failed,
   * and a new message the record made leaves memory: it is not delivered from memory alone. A
   * refusal of another kind (a replica's quorum) is passed on as it is, and the message stays.
   */
  #refused(e: unknown, fresh: StoredMessage | undefined): never {
    const failed = this.wal.failed;
    if (!failed || e instanceof BrokerError) throw e;
    if (fresh && this.messages.get(fresh.id) === fresh) this.#drop(fresh);
    throw logFailedError("write to", this.name, failed);
  }

  /** The payload cache is full: a payload still held goes to its file. */
  evict(msg: StoredMessage): void {
    const at = msg.location;
    if (at && this.messages.get(msg.id) === msg) this.#move(msg, at);
  }

  #move(msg: StoredMessage, at: PayloadLocation): void {
    const before = msg.heldBytes;
    msg.toDisk(at);
    this.#hold(msg.heldBytes - before);
  }

  /**
   * Applies one record to memory: the only way durable state changes, live or at replay.
   * `disk` says where a PUBLISH's payload is in its file, when replay leaves it there; with
   * `keep`, replay also keeps it in memory (r.payload), in the payload cache.
   */
  apply(r: WalRecord, now: number, size: number, disk?: PayloadLocation, keep = false): void {
    // A compacted file lists held messages under their original (older) numbers after META.
    if (r.seq > this.seq) this.seq = r.seq;
    switch (r.type) {
      case RecordType.Meta:
        // Only the latest META matters: a compaction keeps one.
        this.liveBytes += size - this.#metaBytes;
        this.#metaBytes = size;
        this.departed.goneUpTo(r.goneSeq);
        this.settings = {
          policy: r.policy,
          retainMs: r.retainMs,
          visibilityMs: r.visibilityMs,
          maxMessages: r.maxMessages,
          createdAt: r.createdAt,
          maxBytes: r.maxBytes,
        };
        break;
      case RecordType.Publish:
        this.#applyPublish(r, now, size, disk, keep);
        break;
      case RecordType.Group:
        if (!this.groups.has(r.name)) {
          this.groups.set(r.name, new Group(r.name, r.createdAt, this.#onDue));
        }
        this.liveBytes += size;
        break;
      case RecordType.Ack: {
        const g = this.groups.get(r.group);
        if (!g) break;
        for (const id of r.ids) {
          const d = this.delivery(g, id);
          if (d) this.#release(g, d);
        }
        break;
      }
      case RecordType.Requeue: {
        const g = this.groups.get(r.group);
        const d = g && this.delivery(g, r.id);
        if (g && d) g.requeue(d, r.retryCount, r.dueAt, now, r.reason);
        break;
      }
      case RecordType.Remove:
        for (const id of r.ids) {
          const msg = this.messages.get(id);
          if (msg) this.#drop(msg);
        }
        break;
      case RecordType.Key:
        if (IdempotencyKeys.live(r.at, now)) {
          this.keys.keep(r.key, r.id, r.at);
          this.liveBytes += this.keys.framed(r.key, size);
        }
        break;
      case RecordType.Purge:
        for (const g of this.groups.values()) g.clear();
        for (const msg of this.messages.values()) {
          this.liveBytes -= msg.size;
          msg.pending = 0;
          this.departed.add(msg.seq);
        }
        this.#hold(-(this.heldBytes - this.keys.bytes)); // the keys stay for their window
        this.storedBytes = 0;
        this.messages.clear();
        this.expiry.clear();
        break;
      case RecordType.Webhook:
        if (r.active) this.#addWebhook(r, size);
        else this.#removeWebhook(r.id);
        break;
    }
  }

  /** A webhook and its own group, which gets what is published from now on. */
  #addWebhook(r: WebhookRecord, size: number): void {
    const before = this.webhooks.get(r.id);
    this.liveBytes += size - (before?.frameBytes ?? 0);
    this.webhooks.set(r.id, {
      id: r.id,
      url: r.url,
      secret: r.secret,
      sealedSecret: r.sealedSecret,
      createdAt: r.createdAt,
      frameBytes: size,
    });
    const name = webhookGroup(r.id);
    if (!this.groups.has(name)) this.groups.set(name, new Group(name, r.createdAt, this.#onDue));
  }

  /** A removed webhook's group goes, with what it held (messages no other group holds leave). */
  #removeWebhook(id: string): void {
    const hook = this.webhooks.get(id);
    if (!hook) return;
    this.webhooks.delete(id);
    this.liveBytes -= hook.frameBytes;
    const g = this.groups.get(webhookGroup(id));
    if (!g) return;
    if (g.held) {
      for (const msg of [...this.messages.values()]) {
        const d = msg.deliveryOf(g);
        if (d) this.#release(g, d);
      }
    }
    this.groups.delete(g.name);
  }

  #applyPublish(
    r: PublishRecord,
    now: number,
    size: number,
    disk: PayloadLocation | undefined,
    keep: boolean,
  ): void {
    if (r.idemKey && IdempotencyKeys.live(r.timestamp, now)) {
      this.keys.keep(r.idemKey, r.id, r.timestamp);
    }
    if (r.expiresAt && r.expiresAt <= now) {
      this.departed.add(r.seq); // expired while the broker was down
      return;
    }
    // Only a move (dead-letter, redrive) may name a message other groups still hold.
    let msg = r.merge ? this.messages.get(r.id) : undefined;
    const fresh = msg === undefined;
    // Joined: a resuming stream now finds the message under the event it was told last.
    if (msg) msg.seq = r.seq;
    if (!msg) {
      msg = new StoredMessage(r, size, disk, keep);
      this.messages.set(r.id, msg);
      this.liveBytes += size;
      this.#hold(msg.heldBytes);
      this.storedBytes += msg.storedBytes;
      if (msg.expiresAt) this.expiry.push(msg.expiresAt, msg);
    }
    // A second group dead-lettering the same message: redrive must return it to both.
    if (!fresh && this.isDeadLetter) msg.origin = mergeOrigins(msg.origin, r.origin);
    // A redrive joining a message other groups still hold counts on the message they share.
    if (!fresh && r.redriveCount > msg.redriveCount) msg.redriveCount = r.redriveCount;
    if (r.deliveries) {
      for (const spec of r.deliveries) {
        let g = this.groups.get(spec.group);
        if (!g) this.groups.set(spec.group, g = new Group(spec.group, r.timestamp, this.#onDue));
        if (!fresh && msg.deliveryOf(g)) continue;
        g.add(msg, spec.retryCount, spec.dueAt, now, r.reason);
        msg.pending++;
      }
    } else {
      for (const g of this.groups.values()) {
        if (!fresh && msg.deliveryOf(g)) continue;
        g.add(msg, 0, r.dueAt, now, r.reason);
        msg.pending++;
      }
    }
    if (msg.pending === 0) this.#forget(msg);
    else if (fresh && keep && disk) this.memory.cache.add(this, msg);
    this.#applied = msg;
  }

  /**
   * When something of the topic comes due next: a TTL, a key leaving its window, a delay, or
   * (with `leases`) a lease end. Stale entries at the heaps' fronts are dropped on the way.
   */
  nextDue(leases: boolean): number {
    const expiry = this.expiry;
    for (let m = expiry.peek(); m && this.messages.get(m.id) !== m;) {
      expiry.pop();
      m = expiry.peek();
    }
    let due = Math.min(expiry.peekKey(), this.keys.nextExpiry());
    for (const g of this.groups.values()) due = Math.min(due, g.nextDue(leases));
    return due;
  }

  /** Drops idempotency keys older than their window, and their KEY records from liveBytes. */
  expireKeys(now: number): void {
    this.liveBytes -= this.keys.expire(now);
  }

  /** Gives back everything the topic holds against the budget (it is being deleted). */
  releaseMemory(): void {
    this.memory.release(this.heldBytes);
    this.heldBytes = 0;
    this.memory = new MemoryBudget(Infinity);
  }

  /**
   * After a compaction: every payload now lives in the new file, at the offset the snapshot
   * wrote it to, or (appended during the compaction) where the WAL moved it. Payloads read from
   * disk, and large ones still in memory, are read from there; small ones in memory keep their
   * memory and learn their new place. Then the replaced files' readers close.
   */
  relocate(): void {
    const swapped = this.wal.generation === this.#relocationGeneration;
    const moved = this.#relocated, movedAt = this.#relocatedAt;
    this.#relocated = [];
    this.#relocatedAt = [];
    if (!swapped) return; // the compaction did not replace the file: offsets are unchanged
    const done = new Set<StoredMessage>();
    for (let i = 0; i < moved.length; i++) {
      const msg = moved[i]!;
      if (this.messages.get(msg.id) !== msg) continue;
      this.#relocate(msg, this.wal.locate(this.wal.generation, movedAt[i]!));
      done.add(msg);
    }
    // Appended during the compaction: moved along with the tail of the old file.
    for (const msg of this.messages.values()) {
      if (done.has(msg) || !msg.file) continue;
      const at = this.wal.rebase(msg.location!);
      if (at) this.#relocate(msg, at);
    }
    this.wal.releaseRetired();
  }

  #relocate(msg: StoredMessage, at: PayloadLocation | undefined): void {
    if (at && (msg.onDisk || msg.payloadBytes >= this.diskPayloadMin)) return this.#move(msg, at);
    // In memory: learn the new place (or forget one in a file that is going away). A record the
    // snapshot wrote before its own batch was durable gets its place here, not in #durable.
    const first = !msg.file;
    msg.locate(at);
    if (first && at && this.memory.cache.bounded) this.memory.cache.add(this, msg);
  }

  /** Counts `bytes` (negative: freed) on the topic and against the broker's budget. */
  #hold(bytes: number): void {
    this.heldBytes += bytes;
    if (bytes >= 0) this.memory.add(bytes);
    else this.memory.release(-bytes);
  }

  /** A group is done with a delivery; the message leaves memory when no group holds it. */
  #release(g: Group, d: Delivery): void {
    g.remove(d);
    if (--d.msg.pending === 0) this.#forget(d.msg);
  }

  /** Removes a message from every group. */
  #drop(msg: StoredMessage): void {
    for (const d of msg.deliveries()) d.group.remove(d);
    msg.pending = 0;
    this.#forget(msg);
  }

  #forget(msg: StoredMessage): void {
    if (this.messages.get(msg.id) === msg) {
      this.messages.delete(msg.id);
      this.departed.add(msg.seq);
      this.liveBytes -= msg.size;
      this.#hold(-msg.heldBytes);
      this.storedBytes -= msg.storedBytes;
    }
  }

  /** True (and the message dropped from every group) when its TTL has passed. */
  expireIfDue(msg: StoredMessage, now: number): boolean {
    if (!msg.expiresAt || msg.expiresAt > now || !this.messages.has(msg.id)) return false;
    // An in-flight copy keeps its lease: the consumer may still ack it. It goes when the lease ends.
    let inFlight = false;
    for (const d of msg.deliveries()) {
      if (d.state === State.InFlight) inFlight = true;
      else {
        d.group.remove(d);
        msg.pending--;
      }
    }
    if (!inFlight) {
      this.#forget(msg);
      this.counters.expired++;
    }
    return true;
  }

  /** Ends a lease whose message has expired meanwhile; true when it did. */
  dropExpiredInFlight(g: Group, d: Delivery, now: number): boolean {
    if (!d.msg.expiresAt || d.msg.expiresAt > now) return false;
    this.#release(g, d);
    if (!this.messages.has(d.msg.id)) this.counters.expired++;
    return true;
  }

  /** A group's delivery of message `id`, if the group holds it. */
  delivery(g: Group, id: string): Delivery | undefined {
    return this.messages.get(id)?.deliveryOf(g);
  }

  /**
   * Publish time of the oldest message `g` holds: the topic's messages are in publish order,
   * so the first one the group holds is it. Walks at most `limit` messages (scrape-time only).
   */
  oldestTimestamp(g: Group, limit = 10_000): number | undefined {
    if (g.held === 0) return undefined;
    let n = 0;
    let first: number | undefined;
    for (const msg of this.messages.values()) {
      first ??= msg.timestamp;
      if (msg.deliveryOf(g)) return msg.timestamp;
      if (++n >= limit) break;
    }
    return first;
  }

  /**
   * Frames that rebuild the topic, for compaction, yielded in chunks of about `chunkBytes`.
   * The first chunk (META, groups) and the lists of messages and keys are taken when the
   * iteration starts, at T; the WAL captures every record appended from T on and writes them
   * after the snapshot. Each message is encoded as it is when its chunk is built, which may be
   * after T: that is safe because the captured records then apply on top as absolute states
   * (retry counts, due times) or as no-ops, and a message gone since T is skipped. So the
   * event loop is never held for a whole snapshot. A skipped message's own record is gone, and
   * the captured one that removed it names only its id: when its sequence number is above the
   * META's `goneSeq`, a second META at the end says that it left (see lib/departures.ts).
   */
  *snapshot(now: number, chunkBytes = 1024 * 1024): Generator<Uint8Array[]> {
    const gone = this.departed.max;
    const head = [this.#metaFrame()];
    this.liveBytes += head[0]!.length - this.#metaBytes;
    this.#metaBytes = head[0]!.length;
    for (const hook of this.webhooks.values()) {
      const f = this.#webhookFrame(hook);
      this.liveBytes += f.length - hook.frameBytes;
      hook.frameBytes = f.length;
      head.push(f);
    }
    head.push(...this.#groupFrames());
    const messages = [...this.messages.values()];
    const keys = this.keys.liveAt(now);
    yield head;
    const keyed = new Set<string>();
    let chunk: Uint8Array[] = [];
    let bytes = 0;
    // Where each frame lands in the new file: after the header, the head, then in order.
    let pos = FILE_HEADER_BYTES + head.reduce((n, f) => n + f.length, 0);
    let skipped = 0;
    this.#relocated = [];
    this.#relocatedAt = [];
    this.#relocationGeneration = this.wal.generation + 1;
    for (let i = 0; i < messages.length; i++) {
      // Payloads in the file are read a stretch at a time where they lie close together.
      if (i % PREFETCH_MESSAGES === 0) prefetchPayloads(messages.slice(i, i + PREFETCH_MESSAGES));
      const msg = messages[i]!;
      if (this.messages.get(msg.id) !== msg) {
        skipped = Math.max(skipped, msg.seq); // gone since T; its record is captured
        continue;
      }
      if (msg.idemKey) keyed.add(msg.idemKey); // the message's frame carries its key
      const f = this.#messageFrame(msg);
      // The message now rests on its new record: keep the accounting exact.
      this.liveBytes += f.length - msg.size;
      msg.size = f.length;
      this.#relocated.push(msg);
      this.#relocatedAt.push(pos + f.length - msg.payloadBytes);
      pos += f.length;
      chunk.push(f);
      bytes += f.length;
      if (bytes >= chunkBytes) {
        yield chunk;
        chunk = [];
        bytes = 0;
      }
    }
    for (const [key, v] of keys) {
      if (keyed.has(key)) {
        this.liveBytes += this.keys.framed(key, 0);
        continue;
      }
      const f = this.#keyFrame(key, v);
      this.liveBytes += this.keys.framed(key, f.length);
      chunk.push(f);
    }
    if (skipped > gone) {
      const f = this.#metaFrame(skipped);
      this.liveBytes += f.length - this.#metaBytes; // as replay counts it: the last META only
      this.#metaBytes = f.length;
      chunk.push(f);
    }
    if (chunk.length) yield chunk;
  }

  /**
   * Frames that rebuild the topic as it is now, taken in one go and with no side effect: what
   * a leader sends a follower that catches up (compaction uses snapshot(), which also keeps
   * the accounting of the file it writes).
   */
  replicaFrames(now: number): Uint8Array[] {
    const out = [this.#metaFrame()];
    for (const hook of this.webhooks.values()) out.push(this.#webhookFrame(hook));
    out.push(...this.#groupFrames());
    const keyed = new Set<string>();
    for (const msg of this.messages.values()) {
      if (msg.idemKey) keyed.add(msg.idemKey);
      out.push(this.#messageFrame(msg));
    }
    for (const [key, v] of this.keys.liveAt(now)) {
      if (!keyed.has(key)) out.push(this.#keyFrame(key, v));
    }
    return out;
  }

  /** The META record as of now; `goneSeq` defaults to the highest departure. */
  #metaFrame(goneSeq = this.departed.max): Uint8Array {
    return encodeRecord({ type: RecordType.Meta, seq: this.seq, ...this.settings, goneSeq });
  }

  #webhookFrame(hook: WebhookSpec): Uint8Array {
    return encodeRecord({ type: RecordType.Webhook, seq: this.seq, active: true, ...hook });
  }

  /** The named groups' records; a webhook's group comes back with its WEBHOOK record. */
  #groupFrames(): Uint8Array[] {
    const out: Uint8Array[] = [];
    for (const g of this.groups.values()) {
      if (g.name === DEFAULT_GROUP || isWebhookGroup(g.name)) continue;
      out.push(
        encodeRecord({
          type: RecordType.Group,
          seq: this.seq,
          name: g.name,
          createdAt: g.createdAt,
        }),
      );
    }
    return out;
  }

  #keyFrame(key: string, v: SeenKey): Uint8Array {
    return encodeRecord({ type: RecordType.Key, seq: this.seq, key, id: v.id, at: v.at });
  }

  /** One held message as a PUBLISH record carrying each group's delivery state. */
  #messageFrame(msg: StoredMessage): Uint8Array {
    const deliveries = [];
    let reason = msg.reason;
    for (const d of msg.deliveries()) {
      // A lease is not durable: an in-flight message is ready again after a restart.
      deliveries.push({
        group: d.group.name,
        retryCount: d.retryCount,
        dueAt: d.state === State.Delayed ? d.at : 0,
      });
      reason = d.reason ?? reason;
    }
    return encodeRecord({
      type: RecordType.Publish,
      seq: msg.seq,
      id: msg.id,
      timestamp: msg.timestamp,
      priority: msg.priority,
      merge: false,
      expiresAt: msg.expiresAt,
      redriveCount: msg.redriveCount,
      idemKey: msg.idemKey,
      reason,
      origin: msg.origin,
      headers: msg.headers,
      deliveries,
      dueAt: 0,
      payload: msg.readPayload(),
    });
  }
}
