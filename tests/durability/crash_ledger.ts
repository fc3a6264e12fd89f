/**
 * The crash loop's ledger (what the broker answered about every message, carried across kills)
 * and the check after each restart: every topic and its `.dlq` drained and held against it.
 */

import type { MessageJson } from "../../protocol/wire.ts";
import type { ChildBroker } from "../_support/child.ts";
import { drain, queues, textOf } from "../_support/http.ts";

export const TOPICS = ["crash-a", "crash-b", "crash-c"];
/** The attempt that brings retry_count to this moves a message to `{topic}.dlq` (docs/delivery-semantics.md). */
export const ATTEMPTS = 3;

/** What the loop knows about every message, carried across the kill/restart iterations. */
export class Ledger {
  /** payload → topic and id, for each publish answered 201 (or found after a restart). */
  published = new Map<string, { topic: string; id: string }>();
  /** payload → topic, for each publish sent but not (yet) answered. */
  pending = new Map<string, string>();
  /** Publishes in flight at a kill that did not survive it: they must never appear. */
  lost = new Set<string>();
  /** Ids whose ack (single, batch or auto_ack) was answered 2xx. */
  acked = new Set<string>();
  ackPending = new Set<string>();
  /**
   * id → its latest delivery, while no ack or requeue of that delivery was answered: the kill
   * must return it. A requeue's answer may come after the message was delivered again.
   */
  leased = new Map<string, MessageJson>();
  /** id → its retry_count as last answered or recovered: it never goes down. */
  retries = new Map<string, number>();
  /** Deliveries whose requeue was sent but not answered. */
  requeuePending = new Set<MessageJson>();
  /** Ids known to be in `{topic}.dlq` only: their topic must not hold them again. */
  deadLettered = new Set<string>();
  /** Ids in both their topic and its DLQ: a move cut by the kill (docs/architecture.md, "Writing, replay and compaction"). */
  split = new Set<string>();
  problems: string[] = [];

  problem(s: string): void {
    if (this.problems.length < 50) this.problems.push(s);
  }

  /** Whether a requeue that moves `id` to its DLQ was sent and not answered. */
  moving(id: string): boolean {
    return [...this.requeuePending].some((m) => m.id === id && m.retry_count + 1 >= ATTEMPTS);
  }
}

/** What a check after a restart found: copies held, leases given back, DLQ copies, split moves. */
export interface Held {
  held: number;
  leasedBack: number;
  inDlq: number;
  split: number;
}

/** Checks every copy of one payload found after a restart against the ledger. */
function check(ledger: Ledger, payload: string, copies: MessageJson[], held: Held): void {
  const id = copies[0]!.id;
  const where = `payload ${payload} (id ${id})`;
  held.held += copies.length;
  if (ledger.leased.has(id)) held.leasedBack++;
  ledger.ackPending.delete(id); // if its ack was in flight, it did not land
  if (ledger.acked.has(id)) ledger.problem(`${where} came back although its ack was answered`);
  let known = ledger.published.get(payload);
  const sent = ledger.pending.get(payload);
  if (!known && sent !== undefined) {
    // In flight at the kill and made it to disk: from now on it must stay.
    ledger.pending.delete(payload);
    ledger.published.set(payload, known = { topic: sent, id });
  }
  if (!known) {
    if (ledger.lost.has(payload)) ledger.problem(`${where} was gone after a restart; now back`);
    else ledger.problem(`${where} was never published`);
    return;
  }
  const inTopic = copies.filter((m) => m.topic === known.topic);
  const inDlq = copies.filter((m) => m.topic === `${known.topic}.dlq`);
  const moving = ledger.moving(id);
  if (copies.some((m) => m.id !== known.id)) ledger.problem(`${where}: published as ${known.id}`);
  if (inTopic.length + inDlq.length < copies.length) {
    ledger.problem(`${where} found in ${copies.map((m) => m.topic)}, published to ${known.topic}`);
  }
  if (inTopic.length > 1 || inDlq.length > 1) {
    ledger.problem(`${where} present ${copies.length} times in ${copies.map((m) => m.topic)}`);
  } else if (inTopic.length && inDlq.length) {
    // Only a dead-lettering requeue cut by a kill may leave both the copy and the original.
    if (moving || ledger.split.has(id)) ledger.split.add(id);
    else ledger.problem(`${where} is in ${known.topic} and in its DLQ`);
  } else if (ledger.split.has(id)) {
    ledger.problem(`${where} lost one of the two copies an earlier kill left`);
  } else if (inDlq.length && !moving && !ledger.deadLettered.has(id)) {
    ledger.problem(`${where} is in the DLQ but no requeue could have moved it there`);
  } else if (inTopic.length && ledger.deadLettered.has(id)) {
    ledger.problem(`${where} is back in ${known.topic} after it was dead-lettered`);
  }
  if (inDlq.length && !inTopic.length) ledger.deadLettered.add(id);
  held.inDlq += inDlq.length;
  for (const m of inTopic) {
    const floor = ledger.retries.get(id) ?? 0;
    if (m.retry_count < floor || m.retry_count >= ATTEMPTS) {
      ledger.problem(`${where}: retry_count ${m.retry_count} in its topic, ${floor} answered`);
    }
    ledger.retries.set(id, m.retry_count);
  }
  for (const m of inDlq) {
    if (m.retry_count !== ATTEMPTS) ledger.problem(`${where}: retry_count ${m.retry_count} in DLQ`);
  }
}

/**
 * Takes every message of every topic (and its `.dlq`) of a freshly restarted broker and checks
 * it against the ledger. With `final`, takes with auto_ack; otherwise holds them with a long
 * lease so the next iteration's consumers cannot see them and the next kill must bring them back.
 */
export async function verify(child: ChildBroker, ledger: Ledger, final: boolean): Promise<Held> {
  const before = await queues(child.url);
  const how = final ? "auto_ack=true" : "visibility=1h";
  const found = new Map<string, MessageJson[]>();
  for (const topic of TOPICS) {
    const item = before.get(topic);
    const main = await drain(child.url, topic, how);
    // A requeue's delay=50ms may outlast the restart: long-poll for those.
    if (item?.delayed) main.push(...await drain(child.url, topic, `${how}&timeout=1s`));
    const dlq = await drain(child.url, `${topic}.dlq`, how);
    if (item) {
      if (item.in_flight !== 0) ledger.problem(`${topic}: in_flight ${item.in_flight} at start`);
      if (item.depth + item.delayed !== main.length) {
        ledger.problem(`${topic}: depth ${item.depth} + ${item.delayed} but ${main.length} taken`);
      }
      if ((item.dlq_depth ?? 0) !== dlq.length) {
        ledger.problem(`${topic}: dlq_depth ${item.dlq_depth} but ${dlq.length} taken`);
      }
    } else if (main.length + dlq.length > 0) {
      ledger.problem(`${topic}: missing from /api/queues but holds ${main.length + dlq.length}`);
    }
    for (const m of [...main, ...dlq]) {
      const p = textOf(m);
      found.set(p, [...found.get(p) ?? [], m]);
    }
  }
  const held: Held = { held: 0, leasedBack: 0, inDlq: 0, split: 0 };
  for (const [payload, copies] of found) check(ledger, payload, copies, held);
  held.split = [...ledger.split].filter((id) => !ledger.acked.has(id)).length;

  for (const [payload, { id }] of ledger.published) {
    if (found.has(payload) || ledger.acked.has(id)) continue;
    if (ledger.ackPending.has(id)) {
      // The ack was in flight at the kill and landed: it must stay acked.
      ledger.ackPending.delete(id);
      ledger.acked.add(id);
      continue;
    }
    ledger.problem(`payload ${payload} (id ${id}) was answered 201 and is lost`);
  }
  for (const payload of ledger.pending.keys()) ledger.lost.add(payload);
  ledger.pending.clear();
  ledger.ackPending.clear();
  ledger.requeuePending.clear();
  ledger.leased.clear();
  for (const copies of found.values()) {
    for (const m of copies) {
      if (final) ledger.acked.add(m.id);
      else ledger.leased.set(m.id, m);
    }
  }
  return held;
}
