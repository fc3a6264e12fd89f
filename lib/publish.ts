/**
 * @module Publishing: payload checks, the idempotency lookup, the memory budget and the topic's
 * caps (reject or drop-oldest), the PUBLISH record, and the hand-off to waiting consumers. Also
 * broadcast, which stores nothing.
 */

import { MAX_PAYLOAD_BYTES } from "./config.ts";
import type { Consumers } from "./delivery/consumers.ts";
import type { BrokerContext } from "./context.ts";
import { BrokerError } from "./errors.ts";
import { type BodyHold, heldSize } from "./memory/budget.ts";
import type { SeenKey } from "./idempotency.ts";
import { internHeaders, NORMAL, StoredMessage } from "./message.ts";
import { checkName } from "./names.ts";
import type { Feed } from "./feed.ts";
import type { Topic } from "./topic.ts";
import { uuidv7 } from "./uuid.ts";
import { type PublishRecord, RecordType } from "./storage/record.ts";

/** What a publisher may set on a message. */
export interface PublishOptions {
  ttlMs?: number;
  delayMs?: number;
  priority?: number;
  idempotencyKey?: string;
  /** `X-MQ-*` headers as [name, value, ...], names lower-cased. */
  headers?: string[];
}

/** What a publish stored (or, deduplicated, found stored); times in ms since the epoch. */
export interface Published {
  id: string;
  topic: string;
  timestamp: number;
  /** Index into PRIORITIES. */
  priority: number;
  deduplicated: boolean;
  /** When a delayed message becomes visible (0: now). */
  visibleAt: number;
  /** When it expires (0: never). */
  expiresAt: number;
}

/** Refuses an empty payload (400) and one above MAX_PAYLOAD_BYTES (413). */
export function checkPayload(topic: string, payload: Uint8Array): void {
  if (payload.length === 0) {
    throw new BrokerError("empty_body", `Cannot publish to "${topic}": the body is empty`);
  }
  if (payload.length > MAX_PAYLOAD_BYTES) {
    throw new BrokerError(
      "payload_too_large",
      `Cannot publish to "${topic}": ${payload.length} bytes is more than ${MAX_PAYLOAD_BYTES}`,
    );
  }
}

/** The PUBLISH record of a new message of `topic`, with its id and sequence number. */
export function newPublishRecord(
  topic: Topic,
  payload: Uint8Array,
  opts: PublishOptions,
  now: number,
): PublishRecord {
  const ttl = opts.ttlMs || topic.settings.retainMs;
  return {
    type: RecordType.Publish,
    seq: topic.nextSeq(),
    id: uuidv7(now),
    timestamp: now,
    priority: opts.priority ?? NORMAL,
    merge: false,
    expiresAt: ttl ? now + ttl : 0,
    redriveCount: 0,
    idemKey: opts.idempotencyKey,
    reason: undefined,
    origin: undefined,
    headers: internHeaders(opts.headers),
    deliveries: undefined,
    dueAt: opts.delayMs ? now + opts.delayMs : 0,
    payload,
  };
}

/** Stores a message; resolves once durable (per BROKER_FSYNC). */
export async function publish(
  ctx: BrokerContext,
  name: string,
  payload: Uint8Array,
  opts: PublishOptions = {},
): Promise<Published> {
  checkPayload(name, payload);
  const topic = ctx.getTopic(name);
  const now = ctx.now();
  const key = opts.idempotencyKey;
  if (key !== undefined) {
    const seen = topic.keys.lookup(key, now);
    if (seen) {
      await topic.wal.barrier(); // the original is durable before we point at it
      return seenAnswer(topic, seen, opts);
    }
  }
  counted(topic, () => ctx.memory.admit(name, payload.length));
  makeRoom(ctx, topic, payload.length, now);
  const record = newPublishRecord(topic, payload, opts, now);
  const durable = topic.commit(record, now);
  topic.counters.published++;
  if (!record.dueAt) ctx.deliverAll(topic, now);
  await durable;
  return storedAnswer(topic, record);
}

/** What a publish answers for the message `record` stored. */
export function storedAnswer(topic: Topic, record: PublishRecord): Published {
  return {
    id: record.id,
    topic: topic.name,
    timestamp: record.timestamp,
    priority: record.priority,
    deduplicated: false,
    visibleAt: record.dueAt,
    expiresAt: record.expiresAt,
  };
}

/** What a publish answers when its idempotency key names a message stored before. */
export function seenAnswer(topic: Topic, seen: SeenKey, opts: PublishOptions): Published {
  return {
    id: seen.id,
    topic: topic.name,
    timestamp: seen.at,
    priority: topic.messages.get(seen.id)?.priority ?? opts.priority ?? NORMAL,
    deduplicated: true,
    visibleAt: 0,
    expiresAt: 0,
  };
}

/**
 * Admits a publish body that declares `declaredBytes` before it is read (429 memory_full when
 * the budget has no room for it) and counts its bytes as they arrive until `release()`, once
 * the body is read: bodies in flight cannot take the broker past its budget either.
 */
export function reserve(ctx: BrokerContext, name: string, declaredBytes: number): BodyHold {
  return ctx.memory.reserve(name, declaredBytes, () => {
    const topic = ctx.findTopic(name);
    if (topic) topic.counters.rejectedMemoryFull++;
  });
}

/** Runs a budget check, counting a refusal of `messages` on the topic when it exists. */
export function counted<T>(topic: Topic | undefined, check: () => T, messages = 1): T {
  try {
    return check();
  } catch (e) {
    if (topic) topic.counters.rejectedMemoryFull += messages;
    throw e;
  }
}

/**
 * Applies the topic's caps (`max_messages`, `max_bytes`) to one more message: a `reject`
 * topic refuses it (429 queue_full), a `drop-oldest` one drops its oldest messages.
 */
function makeRoom(ctx: BrokerContext, topic: Topic, payloadBytes: number, now: number): void {
  makeRoomFor(ctx, topic, 1, heldSize(payloadBytes), now);
}

/**
 * Applies the topic's caps to `count` more messages that need `need` bytes in all, at once
 * (a batch publish): all of them fit, or none is stored. A `drop-oldest` topic drops what it
 * must; a batch larger than the caps themselves is refused whatever the policy.
 */
export function makeRoomFor(
  ctx: BrokerContext,
  topic: Topic,
  count: number,
  need: number,
  now: number,
): void {
  const { maxMessages } = ctx.effective(topic);
  const maxBytes = topic.settings.maxBytes || Infinity;
  const overCount = topic.messages.size + count - maxMessages;
  const overBytes = topic.storedBytes + need - maxBytes;
  if (overCount <= 0 && overBytes <= 0) return;
  if (topic.settings.policy === "reject" || need > maxBytes || count > maxMessages) {
    topic.counters.rejectedQueueFull += count;
    const what = count === 1 ? "the message needs" : `the ${count} messages need`;
    const why = need > maxBytes
      ? `${what} ${need} bytes, more than its max_bytes of ${maxBytes}`
      : count > maxMessages
      ? `the batch of ${count} messages is more than its limit of ${maxMessages}`
      : overCount > 0
      ? `queue holds ${topic.messages.size} messages (limit ${maxMessages})`
      : `queue holds ${topic.storedBytes} bytes (max_bytes ${maxBytes})`;
    throw new BrokerError("queue_full", `Cannot publish to "${topic.name}": ${why}`);
  }
  dropOldest(ctx, topic, overCount, overBytes, now);
}

/** Drops the oldest messages until `n` are gone and `bytes` are freed. */
function dropOldest(ctx: BrokerContext, topic: Topic, n: number, bytes: number, now: number) {
  const ids: string[] = [];
  let freed = 0;
  for (const msg of topic.messages.values()) {
    if (ids.length >= n && freed >= bytes) break;
    ids.push(msg.id);
    freed += msg.storedBytes;
  }
  topic.commit({ type: RecordType.Remove, seq: topic.nextSeq(), ids }, now).catch(() => {});
  ctx.log.debug("dropped oldest messages", { topic: topic.name, count: ids.length });
}

/**
 * Offers an ephemeral message to every consumer waiting on the topic at this instant and to its
 * subscribers. Nothing is stored. Returns how many received it.
 */
export function broadcast(
  ctx: BrokerContext,
  consumers: Consumers,
  feed: Feed,
  name: string,
  payload: Uint8Array,
  opts: PublishOptions = {},
): number {
  checkName(name, "topic");
  checkPayload(name, payload);
  const topic = ctx.findTopic(name);
  const now = ctx.now();
  const msg = new StoredMessage({
    id: uuidv7(now),
    seq: 0,
    timestamp: now,
    payload,
    priority: opts.priority ?? NORMAL,
    expiresAt: 0,
    headers: internHeaders(opts.headers),
    idemKey: undefined,
    redriveCount: 0,
    origin: undefined,
    reason: undefined,
  }, 0);
  return consumers.broadcast(name, topic, msg) + feed.broadcast(name, msg);
}
