/**
 * @module Retry counting, moving a message to `{topic}.dlq`, and redrive back. A move writes
 * the publish into the destination's WAL before the removal from the source's, so a crash in
 * between leaves a duplicate (at-least-once), never a loss.
 */

import { DLQ_SUFFIX, MAX_ATTEMPTS } from "../config.ts";
import type { BrokerContext } from "../context.ts";
import { BrokerError } from "../errors.ts";
import type { Group } from "./group.ts";
import { checkName } from "../names.ts";
import type { Delivery, StoredMessage } from "../message.ts";
import { DEFAULT_GROUP, isWebhookGroup, originGroups, type Topic } from "../topic.ts";
import { type DeliverySpec, RecordType } from "../storage/record.ts";

/** The dead-letter topic name of `topic`. */
export function dlqName(topic: string): string {
  return topic + DLQ_SUFFIX;
}

/** Whether one more attempt sends a delivery to the dead-letter queue. */
export function exhausted(topic: Topic, retryCount: number): boolean {
  return retryCount >= MAX_ATTEMPTS && !topic.isDeadLetter;
}

/**
 * Moves one group's delivery into `dlq`, keeping its id, payload, headers and attempts, and hands
 * it to the DLQ's waiting consumers; resolves once both the copy and the removal are durable.
 */
export function deadLetter(
  ctx: BrokerContext,
  source: Topic,
  g: Group,
  d: Delivery,
  dlq: Topic,
  retryCount: number,
  reason: string | undefined,
  now: number,
): Promise<unknown> {
  // A failed log on either side refuses the move before anything changes: the removal is gated
  // on the copy, and a copy refused would fail the source's log too.
  try {
    dlq.assertIntact("dead-letter into");
    source.assertIntact("dead-letter from");
  } catch (e) {
    return Promise.reject(e);
  }
  const msg = d.msg;
  const moved = dlq.commit({
    type: RecordType.Publish,
    seq: dlq.nextSeq(),
    id: msg.id,
    timestamp: msg.timestamp,
    priority: msg.priority,
    merge: true,
    expiresAt: 0, // dead letters wait for inspection; the source's TTL no longer applies
    redriveCount: msg.redriveCount,
    idemKey: undefined,
    reason: reason ?? d.reason,
    origin: g.name === DEFAULT_GROUP ? undefined : g.name,
    headers: msg.headers,
    deliveries: [...dlq.groups.keys()].map((group) => ({ group, retryCount, dueAt: 0 })),
    dueAt: 0,
    payload: msg.payloadToKeep,
  }, now);
  // Memory changes now; the removal reaches the source's disk only after the copy is durable.
  const removed = source.commit(
    { type: RecordType.Ack, seq: source.nextSeq(), group: g.name, ids: [msg.id] },
    now,
    moved,
  );
  source.counters.deadLettered++;
  ctx.deliverAll(dlq, now);
  ctx.log.info("message dead-lettered", {
    topic: source.name,
    group: g.name,
    id: msg.id,
    retry_count: retryCount,
  });
  return Promise.all([moved, removed]);
}

/**
 * The groups a dead letter goes back to: those it failed in, except webhooks removed since
 * (their group would take it and never deliver it); none left, or none named: every group.
 */
function backTo(target: Topic, origin: string | undefined): DeliverySpec[] | undefined {
  const groups = originGroups(origin)?.filter((g) => !isWebhookGroup(g) || target.groups.has(g));
  if (!groups?.length) return undefined;
  return groups.map((group) => ({ group, retryCount: 0, dueAt: 0 }));
}

/**
 * Moves `{topic}.dlq` back into `{topic}`; `name` may name either. With `ids`, only those
 * messages move (ids the DLQ does not hold are skipped).
 */
export async function redrive(
  ctx: BrokerContext,
  name: string,
  ids?: string[],
): Promise<{ topic: string; source: string; moved: number }> {
  checkName(name, "queue");
  const base = name.endsWith(DLQ_SUFFIX) ? name.slice(0, -DLQ_SUFFIX.length) : name;
  checkName(base, "queue");
  const source = dlqName(base);
  const dlq = ctx.findTopic(source);
  if (!dlq && !ctx.findTopic(base)) {
    throw new BrokerError("not_found", `Cannot redrive "${base}": no such queue`);
  }
  if (!dlq || dlq.messages.size === 0) return { topic: base, source, moved: 0 };
  const target = ctx.getTopic(base);
  const now = ctx.now();
  const room = {
    messages: ctx.effective(target).maxMessages - target.messages.size,
    bytes: (target.settings.maxBytes || Infinity) - target.storedBytes,
  };
  const chosen = ids
    ? [...new Set(ids)].map((id) => dlq.messages.get(id)).filter((m) => m !== undefined)
    : dlq.messages.values();
  const { moved, durable } = moveBack(dlq, chosen, target, room, now);
  ctx.deliverAll(target, now);
  await durable;
  ctx.log.info("redrive", { topic: base, moved });
  return { topic: base, source, moved };
}

/**
 * Moves every message of `dlq` back to `target` with retry_count 0 and redrive_count + 1, to
 * the group it came from (or every group), as far as `target` has room (its `max_messages` and
 * `max_bytes`, counted as the memory budget counts). Returns how many moved.
 */
function moveBack(
  dlq: Topic,
  messages: Iterable<StoredMessage>,
  target: Topic,
  room: { messages: number; bytes: number },
  now: number,
): { moved: number; durable: Promise<unknown> } {
  const ids: string[] = [];
  const writes: Promise<void>[] = [];
  let bytesLeft = room.bytes;
  for (const msg of messages) {
    const size = msg.storedBytes;
    if (ids.length >= room.messages || size > bytesLeft) break;
    bytesLeft -= size;
    ids.push(msg.id);
    writes.push(target.commit({
      type: RecordType.Publish,
      seq: target.nextSeq(),
      id: msg.id,
      timestamp: msg.timestamp,
      priority: msg.priority,
      merge: true,
      expiresAt: 0,
      redriveCount: msg.redriveCount + 1,
      idemKey: undefined,
      reason: undefined,
      origin: undefined,
      headers: msg.headers,
      deliveries: backTo(target, msg.origin),
      dueAt: 0,
      payload: msg.payloadToKeep,
    }, now));
  }
  if (ids.length) {
    const copies = Promise.all(writes);
    writes.push(dlq.commit({ type: RecordType.Remove, seq: dlq.nextSeq(), ids }, now, copies));
  }
  return { moved: ids.length, durable: Promise.all(writes) };
}
