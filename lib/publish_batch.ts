/**
 * @module Batch publishing: many messages to one topic in one call, all or nothing. Every
 * check (payloads, the memory budget, the topic's caps for the whole batch) runs before the
 * first record is appended; then every PUBLISH record is appended in the same turn, so group
 * commit writes them in one batch with one fsync, and the call resolves once all are durable.
 * A repeated idempotency key answers that item with the original id, as a single publish does,
 * also when the original is an earlier item of the same batch.
 */

import { MAX_PAYLOAD_BYTES } from "./config.ts";
import type { BrokerContext } from "./context.ts";
import { BrokerError } from "./errors.ts";
import { heldSize } from "./memory/budget.ts";
import {
  counted,
  makeRoomFor,
  newPublishRecord,
  type Published,
  type PublishOptions,
  seenAnswer,
  storedAnswer,
} from "./publish.ts";
import type { SeenKey } from "./idempotency.ts";

/** One message of a batch: its payload and the options a single publish takes. */
export interface BatchItem extends PublishOptions {
  payload: Uint8Array;
}

/** Where an item's answer comes from: stored now, a key seen before, or an earlier item. */
const STORE = -1;
const SEEN = -2;

/**
 * Stores `items` in order as messages of topic `name`; resolves with one answer per item, in
 * order, once every stored one is durable. Refuses the whole batch (nothing stored) when an
 * item is empty or too large (naming its index), or when the batch does not fit the memory
 * budget or the topic's caps.
 */
export async function publishBatch(
  ctx: BrokerContext,
  name: string,
  items: readonly BatchItem[],
): Promise<Published[]> {
  for (let i = 0; i < items.length; i++) {
    const n = items[i]!.payload.length;
    if (n === 0) {
      throw new BrokerError("empty_body", `Cannot publish to "${name}": messages[${i}] is empty`);
    }
    if (n > MAX_PAYLOAD_BYTES) {
      throw new BrokerError(
        "payload_too_large",
        `Cannot publish to "${name}": messages[${i}] has ${n} bytes, more than ${MAX_PAYLOAD_BYTES}`,
      );
    }
  }
  const topic = ctx.getTopic(name);
  const now = ctx.now();
  // Decide every item before changing anything: stored, or the answer of which key.
  const source = new Int32Array(items.length).fill(STORE);
  let seen: Map<number, SeenKey> | undefined;
  let batchKeys: Map<string, number> | undefined;
  let count = 0;
  let payloadBytes = 0;
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    const key = item.idempotencyKey;
    if (key !== undefined) {
      const earlier = batchKeys?.get(key);
      if (earlier !== undefined) {
        source[i] = earlier;
        continue;
      }
      const before = topic.keys.lookup(key, now);
      if (before) {
        source[i] = SEEN;
        (seen ??= new Map()).set(i, before);
        continue;
      }
      (batchKeys ??= new Map()).set(key, i);
    }
    count++;
    payloadBytes += item.payload.length;
  }
  if (count > 0) {
    counted(topic, () => ctx.memory.admit(name, payloadBytes, count), count);
    makeRoomFor(ctx, topic, count, payloadBytes + heldSize(0) * count, now);
  }
  // From here nothing throws before every record is appended: one turn, one WAL batch.
  const out: Published[] = new Array(items.length);
  const durables: Promise<void>[] = [];
  let last: Promise<void> | undefined;
  let ready = false;
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    const from = source[i]!;
    if (from !== STORE) {
      out[i] = from === SEEN
        ? seenAnswer(topic, seen!.get(i)!, item)
        : { ...out[from]!, deduplicated: true, visibleAt: 0, expiresAt: 0 };
      continue;
    }
    const record = newPublishRecord(topic, item.payload, item, now);
    const durable = topic.commit(record, now);
    if (durable !== last) durables.push(last = durable);
    if (!record.dueAt) ready = true;
    out[i] = storedAnswer(topic, record);
  }
  topic.counters.published += count;
  if (ready) ctx.deliverAll(topic, now);
  // A key seen before points at a message that must be durable before we name it.
  if (count < items.length) durables.push(topic.wal.barrier());
  await Promise.all(durables);
  return out;
}
