import { assertEquals, assertRejects } from "../_support/assert.ts";
import { MAX_PAYLOAD_BYTES } from "../../lib/config.ts";
import type { BrokerError } from "../../lib/errors.ts";
import { publish } from "../../lib/publish.ts";
import { publishBatch } from "../../lib/publish_batch.ts";
import { bytes, openBroker, T0, texts } from "./_broker.ts";

Deno.test("publishBatch() stores the items in order, with their own options", async () => {
  const t = await openBroker();
  const b = t.broker;
  const out = await publishBatch(b, "t", [
    { payload: bytes("a") },
    { payload: bytes("b"), priority: 0, ttlMs: 5_000 },
    { payload: bytes("c"), delayMs: 1_000, headers: ["x-mq-k", "v"] },
  ]);
  assertEquals(out.map((p) => [p.priority, p.visibleAt, p.expiresAt, p.deduplicated]), [
    [1, 0, 0, false],
    [0, 0, T0 + 5_000, false],
    [1, T0 + 1_000, 0, false],
  ]);
  assertEquals([...out.map((p) => p.id)].sort(), out.map((p) => p.id), "ids in batch order");
  const topic = b.findTopic("t")!;
  assertEquals(topic.counters.published, 3);
  assertEquals(topic.messages.get(out[2]!.id)?.headers, ["x-mq-k", "v"]);
  await t.close();
});

Deno.test("publishBatch() answers a repeated key with the original, before or inside the batch", async () => {
  const t = await openBroker();
  const b = t.broker;
  const first = await publish(b, "t", bytes("x"), { idempotencyKey: "k1", priority: 0 });
  const out = await publishBatch(b, "t", [
    { payload: bytes("y"), idempotencyKey: "k1" },
    { payload: bytes("z"), idempotencyKey: "k2", ttlMs: 9 },
    { payload: bytes("w"), idempotencyKey: "k2" },
  ]);
  assertEquals(out[0], { ...first, deduplicated: true });
  assertEquals(out[2], { ...out[1]!, deduplicated: true, expiresAt: 0 });
  assertEquals(b.findTopic("t")!.messages.size, 2);
  assertEquals(b.findTopic("t")!.counters.published, 2);
  await t.close();
});

Deno.test("publishBatch() refuses the whole batch: an empty or too large item, the caps, memory", async () => {
  const t = await openBroker({ maxMemoryBytes: 8 * 1024 });
  const b = t.broker;
  const refused = async (items: { payload: Uint8Array }[], code: string, topic = "t") => {
    const e = await assertRejects(() => publishBatch(b, topic, items));
    assertEquals((e as BrokerError).code, code);
    return (e as BrokerError).message;
  };
  const ok = { payload: bytes("ok") };
  assertEquals(
    await refused([ok, { payload: new Uint8Array(0) }], "empty_body"),
    'Cannot publish to "t": messages[1] is empty',
  );
  await refused([ok, ok, { payload: new Uint8Array(MAX_PAYLOAD_BYTES + 1) }], "payload_too_large");
  await refused(Array(20).fill({ payload: new Uint8Array(512) }), "memory_full");
  await b.createTopic("capped", { maxMessages: 3 });
  await publishBatch(b, "capped", [ok, ok]);
  await refused([ok, ok], "queue_full", "capped");
  assertEquals(b.findTopic("capped")!.counters.rejectedQueueFull, 2);
  assertEquals(b.findTopic("t")?.messages.size ?? 0, 0);
  assertEquals(b.findTopic("capped")!.messages.size, 2);
  await t.close();
});

Deno.test("publishBatch() on a drop-oldest topic drops what the whole batch needs", async () => {
  const t = await openBroker();
  const b = t.broker;
  await b.createTopic("d", { maxMessages: 4, policy: "drop-oldest" });
  await publishBatch(b, "d", ["a", "b", "c"].map((s) => ({ payload: bytes(s) })));
  await publishBatch(b, "d", ["x", "y", "z"].map((s) => ({ payload: bytes(s) })));
  assertEquals(texts(b.peek("d", 10)), ["c", "x", "y", "z"]);
  const e = await assertRejects(() =>
    publishBatch(b, "d", Array(5).fill(0).map(() => ({ payload: bytes("n") })))
  );
  assertEquals((e as BrokerError).code, "queue_full");
  await t.close();
});

Deno.test("publishBatch() on a file WAL: every item is there after a reopen", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ferry-batch-" });
  try {
    let t = await openBroker({ dataDir: dir });
    const items = Array.from({ length: 50 }, (_, i) => ({ payload: bytes(`m${i}`) }));
    await publishBatch(t.broker, "w", items);
    await t.close();
    t = await openBroker({ dataDir: dir });
    assertEquals(texts(t.broker.peek("w", 10)), items.slice(0, 10).map((_, i) => `m${i}`));
    assertEquals(t.broker.findTopic("w")!.messages.size, 50);
    await t.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
