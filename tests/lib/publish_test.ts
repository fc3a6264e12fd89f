import { assertEquals, assertRejects, assertThrows } from "../_support/assert.ts";
import { IDEMPOTENCY_WINDOW_MS as W, MAX_PAYLOAD_BYTES } from "../../lib/config.ts";
import type { BrokerError } from "../../lib/errors.ts";
import { heldSize } from "../../lib/memory/budget.ts";
import { broadcast, publish, reserve } from "../../lib/publish.ts";
import { bytes, openBroker, T0, text, texts } from "./_broker.ts";

const UUID7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

Deno.test("publish() answers id, topic, timestamp, priority, visibleAt and expiresAt", async () => {
  const t = await openBroker();
  const b = t.broker;
  const p = await publish(b, "orders", bytes("x"), { delayMs: 1_000, ttlMs: 5_000, priority: 0 });
  assertEquals(UUID7.test(p.id), true, p.id);
  assertEquals(parseInt(p.id.replaceAll("-", "").slice(0, 12), 16), T0, "a UUIDv7 of now");
  assertEquals({ ...p, id: "" }, {
    id: "",
    topic: "orders",
    timestamp: T0,
    priority: 0,
    deduplicated: false,
    visibleAt: T0 + 1_000,
    expiresAt: T0 + 5_000,
  });
  const plain = await publish(b, "orders", bytes("y"));
  assertEquals([plain.priority, plain.visibleAt, plain.expiresAt], [1, 0, 0]);
  await b.createTopic("kept", { retainMs: 60_000 });
  assertEquals((await publish(b, "kept", bytes("z"))).expiresAt, T0 + 60_000, "the topic's retain");
  assertEquals((await publish(b, "kept", bytes("z"), { ttlMs: 10 })).expiresAt, T0 + 10);
  assertEquals(b.findTopic("orders")!.counters.published, 2);
  await t.close();
});

Deno.test("publish() with a key inside its window answers the original; after it, stores anew", async () => {
  const t = await openBroker();
  const b = t.broker;
  const first = await publish(b, "t", bytes("x"), { idempotencyKey: "order-7", priority: 2 });
  t.set(T0 + W - 1);
  const again = await publish(b, "t", bytes("other"), { idempotencyKey: "order-7" });
  assertEquals(again, { ...first, deduplicated: true });
  const topic = b.findTopic("t")!;
  assertEquals([topic.messages.size, topic.counters.published], [1, 1]);
  t.set(T0 + W);
  const fresh = await publish(b, "t", bytes("x"), { idempotencyKey: "order-7" });
  assertEquals([fresh.deduplicated, fresh.id === first.id, fresh.timestamp], [
    false,
    false,
    T0 + W,
  ]);
  assertEquals(topic.messages.size, 2);
  // The window restarts with the new message.
  t.set(T0 + W + 1);
  assertEquals((await publish(b, "t", bytes("x"), { idempotencyKey: "order-7" })).id, fresh.id);
  await t.close();
});

Deno.test("publish() at max_messages: a reject topic refuses, a drop-oldest one drops the oldest", async () => {
  const t = await openBroker();
  const b = t.broker;
  await b.createTopic("strict", { maxMessages: 2 });
  await b.createTopic("rolling", { maxMessages: 2, policy: "drop-oldest" });
  for (const name of ["strict", "rolling"]) {
    for (const p of ["1", "2"]) await publish(b, name, bytes(p));
  }
  const e = await assertRejects(() => publish(b, "strict", bytes("3")), "queue_full");
  assertEquals(e.message, 'Cannot publish to "strict": queue holds 2 messages (limit 2)');
  assertEquals(b.findTopic("strict")!.counters.rejectedQueueFull, 1);
  await publish(b, "rolling", bytes("3"));
  const left = await b.consume("rolling", { peek: true, limit: 10 });
  assertEquals(texts(left), ["2", "3"]);
  await t.close();
});

Deno.test("publish() at max_bytes: reject refuses, drop-oldest frees enough, too big never fits", async () => {
  const t = await openBroker();
  const b = t.broker;
  const maxBytes = 2 * heldSize(10);
  await b.createTopic("strict", { maxBytes });
  await b.createTopic("rolling", { maxBytes, policy: "drop-oldest" });
  for (const name of ["strict", "rolling"]) {
    for (const p of ["aaaaaaaaaa", "bbbbbbbbbb"]) await publish(b, name, bytes(p));
  }
  await assertRejects(() => publish(b, "strict", bytes("c")), "queue_full");
  // 20 bytes need the room of both 10-byte messages.
  await publish(b, "rolling", bytes("cccccccccccccccccccc"));
  const left = await b.consume("rolling", { peek: true, limit: 10 });
  assertEquals(texts(left), ["cccccccccccccccccccc"]);
  const tooBig = new Uint8Array(maxBytes);
  const e = await assertRejects(() => publish(b, "rolling", tooBig), "queue_full");
  assertEquals(e.message.includes("more than its max_bytes"), true, e.message);
  assertEquals(b.findTopic("rolling")!.messages.size, 1, "nothing dropped for it");
  await t.close();
});

Deno.test("publish() past the memory budget refuses with memory_full and a Retry-After", async () => {
  const t = await openBroker({ maxMemoryBytes: heldSize(100) });
  const b = t.broker;
  const { id } = await publish(b, "t", new Uint8Array(100));
  const e = await assertRejects(() => publish(b, "t", bytes("x")), "memory_full") as BrokerError;
  assertEquals(e.retryAfterSeconds, 15, "nothing drained yet: a quarter of the longest wait");
  const topic = b.findTopic("t")!;
  assertEquals([topic.counters.rejectedMemoryFull, topic.messages.size], [1, 1]);
  await b.consume("t");
  await b.ack("t", "", [id]);
  await publish(b, "t", new Uint8Array(100));
  await t.close();
});

Deno.test("reserve() counts a body's bytes against the budget until given back", async () => {
  const t = await openBroker({ maxMemoryBytes: heldSize(100) });
  const b = t.broker;
  const hold = reserve(b, "t", 100);
  assertEquals(b.memory.held, 0, "nothing held before a byte arrives");
  hold.add(100);
  assertEquals(b.memory.held, 100);
  assertThrows(() => reserve(b, "t", 1000), "memory_full");
  await assertRejects(() => publish(b, "t", bytes("x".repeat(500))), "memory_full");
  assertEquals(b.findTopic("t")!.counters.rejectedMemoryFull, 1, "counted once the topic exists");
  assertThrows(() => hold.add(1000), "memory_full");
  assertEquals(b.findTopic("t")!.counters.rejectedMemoryFull, 2, "a refused chunk counts too");
  hold.release();
  hold.release(); // twice is harmless
  assertEquals(b.memory.held, 0);
  reserve(b, "t", 100).release();
  await t.close();
});

Deno.test("broadcast() returns how many waiting consumers got it and stores nothing", async () => {
  const t = await openBroker();
  const b = t.broker;
  assertEquals(broadcast(b, b.consumers, b.feed, "nobody", bytes("x")), 0);
  await b.createGroup("t", "billing");
  const plain = b.consume("t", { timeoutMs: 1_000 });
  const billing = b.consume("t", { group: "billing", timeoutMs: 1_000 });
  const picky = b.consume("t", { timeoutMs: 1_000, filterKey: "k" });
  const sent = broadcast(b, b.consumers, b.feed, "t", bytes('{"hello":1}'), {
    headers: ["x-mq-a", "b"],
  });
  assertEquals(sent, 2);
  const [[m1], [m2]] = await Promise.all([plain, billing]);
  assertEquals([text(m1!.msg.readPayload()), text(m2!.msg.readPayload()), m2?.group], [
    '{"hello":1}',
    '{"hello":1}',
    "billing",
  ]);
  assertEquals(m1?.msg.headers, ["x-mq-a", "b"]);
  const topic = b.findTopic("t")!;
  assertEquals([topic.messages.size, topic.counters.published, topic.counters.delivered], [
    0,
    0,
    0,
  ]);
  t.advance(1_000);
  assertEquals(await picky, [], "its filter did not take the broadcast");
  await t.close();
});

Deno.test("publish() refuses an empty body and one above MAX_PAYLOAD_BYTES, creating nothing", async () => {
  const t = await openBroker();
  const b = t.broker;
  await assertRejects(() => publish(b, "t", new Uint8Array(0)), "empty_body");
  await assertRejects(
    () => publish(b, "t", new Uint8Array(MAX_PAYLOAD_BYTES + 1)),
    "payload_too_large",
  );
  assertThrows(() => broadcast(b, b.consumers, b.feed, "t", new Uint8Array(0)), "empty_body");
  assertEquals(b.findTopic("t"), undefined);
  await publish(b, "t", new Uint8Array(MAX_PAYLOAD_BYTES));
  await t.close();
});
