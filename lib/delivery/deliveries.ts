/**
 * @module A group's deliveries from hand-out to end: take (lease or peek), consume (take or
 * wait), ack, requeue, touch, and the end of a lease, each a record where it changes durable
 * state. A third attempt sends the message to the dead-letter queue (dead_letter.ts).
 */

import { MAX_ANSWER_PAYLOAD_BYTES, MAX_PEEK } from "../config.ts";
import type { Consumers, Taken } from "./consumers.ts";
import type { BrokerContext } from "../context.ts";
import { deadLetter, dlqName, exhausted } from "./dead_letter.ts";
import { BrokerError } from "../errors.ts";
import type { Group, TakeSpec } from "./group.ts";
import {
  type Delivery,
  matchesFilter,
  PayloadFilter,
  State,
  type StoredMessage,
} from "../message.ts";
import { checkName } from "../names.ts";
import { prefetchPayloads } from "../memory/payload_file.ts";
import { DEFAULT_GROUP, type Topic } from "../topic.ts";
import { RecordType } from "../storage/record.ts";
import type { FeedEvent } from "../feed.ts";

/** What a consumer asks for. */
export interface ConsumeOptions {
  group?: string;
  limit?: number;
  timeoutMs?: number;
  autoAck?: boolean;
  peek?: boolean;
  filterKey?: string;
  filterVal?: string;
  visibilityMs?: number;
  /** Fires when the client goes away; a parked consume then leaves the queue. Read on parking. */
  signal?: AbortSignal;
}

/** A message handed to a consumer: what its wire shape is made from. */
export interface Handed {
  topic: string;
  msg: StoredMessage;
  retryCount: number;
  reason: string | undefined;
  /** The consuming group, or for the default group where a dead letter came from ("": none). */
  group: string;
}

/**
 * A message as a consumer is handed it: for a named group, that group; for the default group,
 * where a dead letter came from (`origin`, "" for none). Every consume, peek, stream and socket
 * builds its deliveries here.
 */
export function handed(
  topic: string,
  item: Pick<Handed, "msg" | "retryCount" | "reason">,
  group: string,
  origin: string | undefined,
): Handed {
  const { msg, retryCount, reason } = item;
  return { topic, msg, retryCount, reason, group: group || (origin ?? "") };
}

/** A broadcast message as an item to hand: never retried, no reason. */
export function broadcastItem(msg: StoredMessage): Pick<Handed, "msg" | "retryCount" | "reason"> {
  return { msg, retryCount: 0, reason: undefined };
}

/**
 * What a stream (SSE, a WebSocket spy) hands for a message the feed carried: a stored message,
 * whose `group` names the group a dead letter failed in, or a broadcast.
 */
export function feedDelivery(e: Extract<FeedEvent, { kind: "message" | "broadcast" }>): Handed {
  return e.kind === "message"
    ? handed(e.topic, e, "", e.origin)
    : handed(e.topic, broadcastItem(e.msg), "", "");
}

/** A filter predicate over payloads (docs/api/consume.md). */
export function filterFn(key: string, value: string | undefined): (p: Uint8Array) => boolean {
  return (p) => matchesFilter(p, key, value);
}

/**
 * Takes up to `spec.limit` ready deliveries of `g` within `maxBytes` of payload and leases them
 * (unless peeking); expired messages met on the way are dropped.
 */
export function take(
  topic: Topic,
  g: Group,
  spec: TakeSpec,
  now: number,
  maxBytes = MAX_ANSWER_PAYLOAD_BYTES,
): Delivery[] {
  // A topic whose log failed hands nothing out: its ack could not be recorded (Broker refuses
  // consumes; this stops consumers parked before the failure, and webhooks, too).
  if (!spec.peek && topic.wal.failed) return [];
  const taken = g.take(
    spec.limit,
    spec.filter,
    (d) => topic.expireIfDue(d.msg, now),
    spec.peek,
    maxBytes,
    spec.among,
  );
  if (!spec.peek) {
    for (const d of taken) g.lease(d, now + spec.visibilityMs);
    topic.counters.delivered += taken.length;
  }
  // Payloads past the payload cache are in the WAL file, usually side by side: one read.
  if (taken.length > 1) prefetchPayloads(taken.map((d) => d.msg));
  return taken;
}

/**
 * Takes (or peeks at) up to `limit` messages, long-polling up to `timeoutMs` when empty, and
 * returns what `handOver` makes of them. Nothing is acked (auto_ack) before `handOver` has
 * returned: when it throws, what was taken is put back as it was, and the error goes to the
 * caller.
 */
export async function consume<T>(
  ctx: BrokerContext,
  consumers: Consumers,
  name: string,
  opts: ConsumeOptions,
  handOver: (messages: Handed[]) => T,
): Promise<T> {
  checkName(name, "topic");
  const groupName = opts.group ?? DEFAULT_GROUP;
  if (groupName) checkName(groupName, "group");
  const timeoutMs = opts.timeoutMs ?? 0;
  const filter = opts.filterKey ? new PayloadFilter(opts.filterKey, opts.filterVal) : undefined;
  const now = ctx.now();
  // Where the poll takes from, once the topic exists: its group (created by a first consume
  // with `group=`) and what it asks.
  const at: { topic?: Topic; g?: Group; spec?: TakeSpec } = {};
  const join = (topic: Topic) => {
    const g = ctx.getGroup(topic, groupName);
    const spec: TakeSpec = {
      limit: opts.limit ?? 1,
      filter,
      visibilityMs: opts.visibilityMs ?? ctx.effective(topic).visibilityMs,
      peek: opts.peek ?? false,
    };
    Object.assign(at, { topic, g, spec });
    return { group: g, spec };
  };
  let taken: Taken = { items: [], ephemeral: false };
  const found = ctx.findTopic(name);
  if (found) {
    const { group: g, spec } = join(found);
    taken.items = take(found, g, spec, now);
    if (!taken.items.length && timeoutMs > 0) {
      taken = await consumers.wait(found, g, spec, now + timeoutMs, now, opts.signal);
    }
  } else if (timeoutMs > 0) {
    // Waiting creates nothing: the topic comes with its first publish (or POST /api/topics),
    // which joins this poll to it before its message is stored (docs/api/consume.md).
    taken = await consumers.waitForTopic(name, filter, join, now + timeoutMs, opts.signal);
  }
  const { items, ephemeral } = taken;
  const { topic, g, spec } = at;
  // A broadcast hands out a message that is not stored: there is nothing to ack.
  const leased = topic && g && items.length > 0 && !spec?.peek && !ephemeral
    ? { topic, g }
    : undefined;
  let answer: T;
  try {
    answer = handOver(items.map((d) => handed(name, d, groupName, d.msg.origin)));
  } catch (e) {
    if (leased && ctx.findTopic(name) === leased.topic) {
      leased.g.unlease(items as Delivery[]);
      leased.topic.counters.delivered -= items.length;
      ctx.deliver(leased.topic, leased.g, ctx.now()); // to another waiting consumer, if one waits
    }
    throw e;
  }
  if (opts.autoAck && leased && ctx.findTopic(name) === leased.topic) {
    await ackIn(leased.topic, leased.g, items.map((d) => d.msg.id), ctx.now()).durable;
  }
  return answer;
}

/** Up to MAX_PEEK messages of the default group, in delivery order, without taking them. */
export function peek(ctx: BrokerContext, name: string, limit = MAX_PEEK): Handed[] {
  checkName(name, "queue");
  const topic = ctx.findTopic(name);
  if (!topic) return [];
  const spec = { limit: Math.min(limit, MAX_PEEK), filter: undefined, peek: true, visibilityMs: 0 };
  return take(topic, topic.defaultGroup, spec, ctx.now())
    .map((d) => handed(name, d, "", d.msg.origin));
}

/** Acks ids for a group; returns which were held, once the ack is durable. */
export function ack(
  ctx: BrokerContext,
  name: string,
  group: string,
  ids: string[],
): Promise<{ acked: string[]; notFound: string[] }> {
  checkName(name, "topic");
  if (group) checkName(group, "group");
  const topic = ctx.findTopic(name);
  const g = topic?.groups.get(group);
  if (!topic || !g) return Promise.resolve({ acked: [], notFound: [...new Set(ids)] });
  const { acked, notFound, durable } = ackIn(topic, g, ids, ctx.now());
  return durable.then(() => ({ acked, notFound }));
}

/** Acks what `g` holds of `ids` with one record. */
export function ackIn(topic: Topic, g: Group, ids: string[], now: number) {
  const acked: string[] = [];
  const notFound: string[] = [];
  const seen = ids.length > 1 ? new Set<string>() : undefined;
  for (const id of ids) {
    if (seen?.has(id)) continue;
    seen?.add(id);
    (topic.delivery(g, id) ? acked : notFound).push(id);
  }
  let durable: Promise<unknown> = Promise.resolve();
  if (acked.length) {
    durable = topic.commit({
      type: RecordType.Ack,
      seq: topic.nextSeq(),
      group: g.name,
      ids: acked,
    }, now);
    topic.counters.acked += acked.length;
  }
  return { acked, notFound, durable };
}

function inFlight(ctx: BrokerContext, name: string, group: string, id: string, action: string) {
  checkName(name, "topic");
  if (group) checkName(group, "group");
  const topic = ctx.findTopic(name);
  const g = topic?.groups.get(group);
  const d = g && topic?.delivery(g, id);
  if (!topic || !g || !d || d.state !== State.InFlight) {
    const where = group ? `"${name}" group "${group}"` : `"${name}"`;
    throw new BrokerError(
      "message_not_found",
      `Cannot ${action} message "${id}" in ${where}: no such message is in flight`,
    );
  }
  return { topic, g, d };
}

/** Where a requeued message went: back to its topic, or to the dead-letter queue. */
export interface Requeued {
  retryCount: number;
  deadLettered: boolean;
  /** The topic that holds it now. */
  topic: string;
}

/** Puts an in-flight message back (or into the DLQ after MAX_ATTEMPTS). */
export async function requeue(
  ctx: BrokerContext,
  name: string,
  group: string,
  id: string,
  opts: { delayMs?: number; reason?: string; deadLetter?: boolean } = {},
): Promise<Requeued> {
  const { topic, g, d } = inFlight(ctx, name, group, id, "requeue");
  if (opts.deadLetter && topic.isDeadLetter) {
    throw new BrokerError(
      "invalid_parameter",
      `Cannot dead-letter message "${id}" of "${name}": it is in a dead-letter queue already`,
    );
  }
  const now = ctx.now();
  const retry = d.retryCount + 1;
  topic.counters.requeued++;
  if (opts.deadLetter || exhausted(topic, retry)) {
    const dlq = ctx.getTopic(dlqName(name));
    await deadLetter(ctx, topic, g, d, dlq, retry, opts.reason, now);
    return { retryCount: retry, deadLettered: true, topic: dlq.name };
  }
  const dueAt = opts.delayMs ? now + opts.delayMs : 0;
  const durable = topic.commit({
    type: RecordType.Requeue,
    seq: topic.nextSeq(),
    group: g.name,
    id,
    retryCount: retry,
    dueAt,
    reason: opts.reason,
  }, now);
  if (!dueAt) ctx.deliver(topic, g, now);
  await durable;
  return { retryCount: retry, deadLettered: false, topic: name };
}

/** A message in flight, for operators: what was handed out and when its lease ends. */
export interface Leased extends Handed {
  leaseEndsAt: number;
}

/** Up to `limit` messages in flight in a group, the soonest lease end first. */
export function leased(ctx: BrokerContext, name: string, group: string, limit: number): Leased[] {
  checkName(name, "queue");
  if (group) checkName(group, "group");
  const g = ctx.findTopic(name)?.groups.get(group);
  if (!g) return [];
  return g.inFlight(limit).map((d) => ({
    topic: name,
    msg: d.msg,
    retryCount: d.retryCount,
    reason: d.reason,
    group,
    leaseEndsAt: d.at,
  }));
}

/**
 * Ends the lease of an in-flight message now, for an operator: it is ready again at once and
 * keeps its retry count (a release is not a failed attempt). Resolves once durable.
 */
export async function release(
  ctx: BrokerContext,
  name: string,
  group: string,
  id: string,
): Promise<Requeued> {
  const { topic, g, d } = inFlight(ctx, name, group, id, "release");
  const now = ctx.now();
  const durable = topic.commit({
    type: RecordType.Requeue,
    seq: topic.nextSeq(),
    group: g.name,
    id,
    retryCount: d.retryCount,
    dueAt: 0,
    reason: undefined,
  }, now);
  ctx.deliver(topic, g, now);
  await durable;
  return { retryCount: d.retryCount, deadLettered: false, topic: name };
}

/**
 * Extends the lease of an in-flight message by `byMs` from now (default: the topic's
 * visibility); returns the new lease end.
 */
export function touch(
  ctx: BrokerContext,
  name: string,
  group: string,
  id: string,
  byMs?: number,
): number {
  const { topic, g, d } = inFlight(ctx, name, group, id, "touch");
  const until = ctx.now() + (byMs ?? ctx.effective(topic).visibilityMs);
  g.touch(d, until);
  return until;
}

/**
 * Extends the leases `g` holds of `ids` by `byMs` from now (default: the topic's visibility), as
 * one touch each: ids not in flight are listed, not an error. Touches write no record.
 */
export function touchMany(
  ctx: BrokerContext,
  name: string,
  group: string,
  ids: string[],
  byMs?: number,
): { touched: string[]; notFound: string[]; until: number; leaseMs: number } {
  checkName(name, "topic");
  if (group) checkName(group, "group");
  const topic = ctx.findTopic(name);
  const g = topic?.groups.get(group);
  const leaseMs = byMs ?? (topic ? ctx.effective(topic).visibilityMs : 0);
  const until = ctx.now() + leaseMs;
  const touched: string[] = [];
  const notFound: string[] = [];
  const seen = new Set<string>();
  for (const id of ids) {
    if (seen.has(id)) continue;
    seen.add(id);
    const d = g && topic?.delivery(g, id);
    if (d && d.state === State.InFlight) {
      g!.touch(d, until);
      touched.push(id);
    } else notFound.push(id);
  }
  return { touched, notFound, until, leaseMs };
}

/**
 * A lease ended without an ack: the message is ready again with one more attempt, or goes to
 * the dead-letter queue after the last. Writes a record: only a leader does this.
 */
export function leaseEnded(
  ctx: BrokerContext,
  topic: Topic,
  g: Group,
  d: Delivery,
  now: number,
): void {
  if (topic.dropExpiredInFlight(g, d, now)) return;
  const retry = d.retryCount + 1;
  const reason = "visibility timeout";
  topic.counters.requeued++;
  let done: Promise<unknown>;
  if (exhausted(topic, retry)) {
    const dlq = ctx.getTopic(dlqName(topic.name));
    done = deadLetter(ctx, topic, g, d, dlq, retry, reason, now);
  } else {
    done = topic.commit({
      type: RecordType.Requeue,
      seq: topic.nextSeq(),
      group: g.name,
      id: d.msg.id,
      retryCount: retry,
      dueAt: 0,
      reason,
    }, now);
  }
  done.catch((e) => ctx.log.error("lease end not recorded", { topic: topic.name, error: e }));
}
