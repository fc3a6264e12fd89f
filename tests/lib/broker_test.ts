import type { Handed } from "../../lib/broker.ts";
import { messageJson } from "../../routes/wire.ts";

const wire = (ms: Handed[]) => ms.map(messageJson);
import { assert, assertEquals, assertRejects } from "../_support/assert.ts";
import { Broker } from "../../lib/broker.ts";
import { type Config, defaultConfig } from "../../lib/config.ts";
import { publishThroughCompaction } from "./_broker.ts";
import type { BrokerError } from "../../lib/errors.ts";
import { silentLogger } from "../../lib/log.ts";
import { FileWal } from "../../lib/storage/file_wal.ts";
import { statusOf } from "../../routes/http.ts";

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (m: { payload_text?: string }) => m.payload_text;

async function open(overrides: Partial<Config> = {}, start = 1_000_000) {
  const dir = overrides.dataDir ?? await Deno.makeTempDir();
  let now = start;
  const broker = await Broker.open(defaultConfig({ dataDir: dir, ...overrides }), {
    clock: () => now,
  });
  return {
    broker,
    dir,
    advance(ms: number) {
      now += ms;
      broker.sweep(now);
    },
    get now() {
      return now;
    },
  };
}

Deno.test("Broker.consume(, {}, wire) honours delay, TTL and priority with a hand-driven clock", async () => {
  const t = await open();
  await t.broker.publish("t", bytes("low"), { priority: 2 });
  await t.broker.publish("t", bytes("later"), { delayMs: 1_000 });
  await t.broker.publish("t", bytes("short"), { ttlMs: 500 });
  await t.broker.publish("t", bytes("high"), { priority: 0 });
  t.advance(500); // "short" expires
  assertEquals((await t.broker.consume("t", { limit: 10, autoAck: true }, wire)).map(text), [
    "high",
    "low",
  ]);
  t.advance(499);
  assertEquals(await t.broker.consume("t", {}, wire), []);
  t.advance(1);
  assertEquals((await t.broker.consume("t", { autoAck: true }, wire)).map(text), ["later"]);
  assertEquals(t.broker.findTopic("t")!.counters.expired, 1);
  await t.broker.close();
  await Deno.remove(t.dir, { recursive: true });
});

Deno.test("Broker.sweep() ends leases: each counts as an attempt, the third dead-letters", async () => {
  const t = await open({ visibilityMs: 1_000 });
  const { id } = await t.broker.publish("jobs", bytes("x"));
  for (let attempt = 0; attempt < 3; attempt++) {
    const [m] = await t.broker.consume("jobs", {}, wire);
    assertEquals(m?.retry_count, attempt);
    t.advance(1_000);
  }
  assertEquals(await t.broker.consume("jobs", {}, wire), []);
  const [dead] = await t.broker.consume("jobs.dlq", { peek: true }, wire);
  assertEquals([dead?.id, dead?.retry_count, dead?.reason], [id, 3, "visibility timeout"]);
  assertEquals(await t.broker.redrive("jobs"), { topic: "jobs", source: "jobs.dlq", moved: 1 });
  const [back] = await t.broker.consume("jobs", {}, wire);
  assertEquals([back?.id, back?.retry_count, back?.redrive_count], [id, 0, 1]);
  await t.broker.close();
  await Deno.remove(t.dir, { recursive: true });
});

Deno.test("Broker.open() rebuilds after a restart exactly what was live", async () => {
  const t = await open();
  const b = t.broker;
  await b.createTopic("orders", { policy: "drop-oldest", retainMs: 3_600_000 });
  await b.createGroup("orders", "billing");
  await b.publish("orders", bytes("a"), { headers: ["x-mq-k", "v"], idempotencyKey: "key-a" });
  await b.publish("orders", bytes("b"), { priority: 0 });
  await b.publish("orders", bytes("c"), { delayMs: 60_000 });
  const [first] = await b.consume("orders", {}, wire); // "b" (high)
  await b.requeue("orders", "", first!.id, { reason: "later" });
  const [billed] = await b.consume("orders", { group: "billing", autoAck: true }, wire);
  const live = await b.consume("orders", { peek: true, limit: 10 }, wire);
  const liveBilling = await b.consume("orders", { group: "billing", peek: true, limit: 10 }, wire);
  await b.close();

  const again = await open({ dataDir: t.dir }, t.now);
  const r = again.broker;
  assertEquals(await r.consume("orders", { peek: true, limit: 10 }, wire), live);
  assertEquals(
    await r.consume("orders", { group: "billing", peek: true, limit: 10 }, wire),
    liveBilling,
  );
  assertEquals(billed?.payload_text, "b");
  const topic = r.findTopic("orders")!;
  assertEquals([topic.settings.policy, topic.settings.retainMs], ["drop-oldest", 3_600_000]);
  const dup = await r.publish("orders", bytes("a again"), { idempotencyKey: "key-a" });
  assertEquals(dup.deduplicated, true);
  again.advance(60_000);
  assertEquals((await r.consume("orders", { limit: 10, peek: true }, wire)).map(text), [
    "b",
    "a",
    "c",
  ]);
  await r.close();
  await Deno.remove(t.dir, { recursive: true });
});

Deno.test("Broker compaction shrinks the WAL and a restart sees the same messages", async () => {
  const t = await open({ compactMinBytes: 0, compactRatio: 2 });
  const b = t.broker;
  for (let i = 0; i < 500; i++) await b.publish("c", bytes(`m${i}`.padEnd(200, ".")));
  for (let i = 0; i < 495; i++) {
    const [m] = await b.consume("c", {}, wire);
    await b.ack("c", "", [m!.id]);
  }
  const before = (await Deno.stat(`${t.dir}/c.wal`)).size;
  t.advance(10);
  await b.findTopic("c")!.wal.barrier();
  await new Promise((r) => setTimeout(r, 0)); // let the background compaction start
  await b.close(); // close waits for a running compaction
  const after = (await Deno.stat(`${t.dir}/c.wal`)).size;
  assert(after * 10 < before, `compacted ${before} → ${after}`);
  const again = await open({ dataDir: t.dir }, t.now);
  const left = await again.broker.consume("c", { limit: 10, peek: true }, wire);
  assertEquals(left.map((m) => m.payload_text!.replace(/\.+$/, "")), [
    "m495",
    "m496",
    "m497",
    "m498",
    "m499",
  ]);
  await again.broker.close();
  await Deno.remove(t.dir, { recursive: true });
});

Deno.test("Broker.publish() applies the topic policy at the cap", async () => {
  const t = await open({ maxQueue: 2 });
  await t.broker.createTopic("drop", { policy: "drop-oldest" });
  for (const s of ["1", "2", "3"]) {
    await t.broker.publish("drop", bytes(s));
    await t.broker.publish("keep", bytes(s)).catch(() => {});
  }
  assertEquals((await t.broker.consume("drop", { limit: 5, peek: true }, wire)).map(text), [
    "2",
    "3",
  ]);
  await assertRejects(() => t.broker.publish("keep", bytes("4")), "queue_full");
  await t.broker.close();
  await Deno.remove(t.dir, { recursive: true });
});

Deno.test("Topic sequence numbers keep rising across compaction and restart", async () => {
  const t = await open({ compactMinBytes: 0, compactRatio: 2 });
  for (let i = 0; i < 50; i++) await t.broker.publish("s", bytes(`m${i}`));
  const [first] = await t.broker.consume("s", {}, wire);
  for (let i = 0; i < 49; i++) {
    const [m] = await t.broker.consume("s", {}, wire);
    await t.broker.ack("s", "", [m!.id]);
  }
  const before = t.broker.findTopic("s")!.seq;
  t.advance(10); // compacts: the held message keeps its old sequence number
  await new Promise((r) => setTimeout(r, 0));
  await t.broker.close();
  const again = await open({ dataDir: t.dir }, t.now);
  assert(again.broker.findTopic("s")!.seq >= before, "seq went backwards after replay");
  assertEquals((await again.broker.consume("s", {}, wire))[0]?.id, first!.id);
  await again.broker.close();
  await Deno.remove(t.dir, { recursive: true });
});

Deno.test("Compaction encoding in chunks while acks, requeues and publishes run replays to the live state", async () => {
  const t = await open({ compactMinBytes: 2 ** 40 }); // compaction only when the test asks
  const b = t.broker;
  for (let i = 0; i < 300; i++) await b.publish("z", bytes(`m${i}`.padEnd(300, ".")));
  const taken = await b.consume("z", { limit: 100 }, wire);
  const topic = b.findTopic("z")!;
  const work: Promise<unknown>[] = [];
  let step = 0;
  // One step of work right after each chunk is produced, so it lands while that chunk is being
  // written: on messages already encoded, not yet encoded, and not in the snapshot at all.
  const act = () => {
    for (let k = 0; k < 4 && step < taken.length; k++, step++) {
      const m = taken[step]!;
      if (step % 3 === 0) work.push(b.ack("z", "", [m.id]));
      else if (step % 3 === 1) work.push(b.requeue("z", "", m.id, { reason: `r${step}` }));
      if (step % 10 === 0) work.push(b.publish("z", bytes(`late${step}`)));
      if (step === 50) work.push(b.createGroup("z", "audit"));
    }
  };
  const compaction = topic.wal.compact(() => {
    const chunks = topic.snapshot(t.now, 2048); // ~360 B a message: dozens of chunks
    let first = true;
    return {
      [Symbol.iterator]: () => ({
        next: () => {
          const r = chunks.next();
          // The first step runs once the snapshot's point in time is fixed, during the first
          // write; the others run between writes.
          if (first) queueMicrotask(act);
          else act();
          first = false;
          return r;
        },
      }),
    };
  });
  await compaction;
  act(); // whatever is left, after the swap
  while (step < taken.length) act();
  await Promise.all(work);
  const live = await b.consume("z", { peek: true, limit: 1000 }, wire);
  await b.close();
  const again = await open({ dataDir: t.dir }, t.now);
  const replayed = await again.broker.consume("z", { peek: true, limit: 1000 }, wire);
  const key = (m: { id: string; retry_count: number; reason?: string }) =>
    `${m.id}/${m.retry_count}/${m.reason ?? ""}`;
  // Leases are not durable: what was still in flight is ready again after the restart.
  const inFlight = taken.filter((_, i) => i % 3 === 2);
  assertEquals(replayed.map(key).sort(), [...live, ...inFlight].map(key).sort());
  assertEquals(again.broker.findTopic("z")!.groups.has("audit"), true);
  await again.broker.close();
  await Deno.remove(t.dir, { recursive: true });
});

Deno.test("Broker.consume(, {}, wire) acks nothing and puts messages back when handOver throws", async () => {
  const t = await open({ dataDir: ":memory:" });
  const b = t.broker;
  for (const s of ["a", "b", "c"]) await b.publish("h", bytes(s), { priority: s === "c" ? 0 : 1 });
  await assertRejects(() =>
    b.consume("h", { limit: 2, autoAck: true }, () => {
      throw new RangeError("Invalid string length");
    })
  );
  const g = b.findTopic("h")!.defaultGroup;
  assertEquals([g.readyCount, g.inFlightCount], [3, 0]);
  assertEquals(b.findTopic("h")!.counters.delivered, 0);
  // Same order and attempts as before the failed hand-over: c (high) then a, b.
  const again = await b.consume("h", { limit: 3, autoAck: true }, wire);
  assertEquals(again.map(text), ["c", "a", "b"]);
  assertEquals(again.map((m) => m.retry_count), [0, 0, 0]);
  assertEquals(g.held, 0);
  await b.close();
});

Deno.test("Broker keeps a topic's max_bytes across a restart and a compaction", async () => {
  const t = await open({ compactMinBytes: 0, compactRatio: 2 });
  await t.broker.createTopic("mb", { policy: "reject", maxBytes: 4096 });
  await t.broker.publish("mb", bytes("x".repeat(3000)));
  await t.broker.close();
  const again = await open({ dataDir: t.dir, compactMinBytes: 0, compactRatio: 2 }, t.now);
  assertEquals(again.broker.findTopic("mb")!.settings.maxBytes, 4096);
  await assertRejects(() => again.broker.publish("mb", bytes("y".repeat(3000))), "queue_full");
  const [m] = await again.broker.consume("mb", { autoAck: true }, wire);
  assertEquals(m!.payload_text!.length, 3000);
  again.advance(10); // compacts: the file is all garbage now
  await again.broker.close();
  const third = await open({ dataDir: t.dir }, again.now);
  assertEquals(third.broker.findTopic("mb")!.settings.maxBytes, 4096);
  await third.broker.close();
  await Deno.remove(t.dir, { recursive: true });
});

Deno.test("Broker reads payloads kept on disk right, across compactions racing publishes", async () => {
  const t = await open({ compactMinBytes: 0, compactRatio: 2, diskPayloadMinBytes: 1024 });
  const b = t.broker;
  const sent = new Map<string, string>();
  const publishOne = async (i: number) => {
    const text = `${i}:`.padEnd(1024 + (i * 37) % 4000, String.fromCharCode(97 + (i % 26)));
    sent.set((await b.publish("d", bytes(text))).id, text);
  };
  const check = async (what: string) => {
    const held = await b.consume("d", { peek: true, limit: 1000 }, wire);
    assertEquals(held.length, sent.size, `${what}: count`);
    for (const m of held) assertEquals(m.payload_text, sent.get(m.id), `${what}: ${m.id}`);
  };
  for (let i = 0; i < 60; i++) await publishOne(i);
  const topic = b.findTopic("d")!;
  assert(topic.heldBytes < 60 * 1024, "the payloads are on disk");
  for (let round = 1; round <= 3; round++) {
    const ids = [...sent.keys()].slice(0, 40); // acked while ready: the file is mostly garbage
    await b.ack("d", "", ids);
    for (const id of ids) sent.delete(id);
    const raced = await publishThroughCompaction(t, topic, publishOne, round * 1000);
    assert(raced > 10, "some publishes raced the compaction");
    await check(`after compaction ${round}`);
  }
  await b.close();
  const again = await open({ dataDir: t.dir, diskPayloadMinBytes: 1024 }, t.now);
  const held = await again.broker.consume("d", { peek: true, limit: 1000 }, wire);
  assertEquals(held.length, sent.size);
  for (const m of held) assertEquals(m.payload_text, sent.get(m.id));
  await again.broker.close();
  await Deno.remove(t.dir, { recursive: true });
});

Deno.test("Broker.publish() once its topic's log failed: storage_failed, nothing held, nothing delivered", async () => {
  const { broker, dir } = await open();
  try {
    await broker.publish("orders", bytes("kept"));
    const topic = broker.findTopic("orders")!;
    // As wal_contract_test's `broken` log: the next write finds no file to open.
    topic.wal = new FileWal(`${dir}/missing/orders.wal`, dir, 0, {
      fsync: "always",
      log: silentLogger,
    });
    const lost = await assertRejects(() => broker.publish("orders", bytes("lost")));
    assertEquals((lost as BrokerError).code, "storage_failed", lost.message);
    const refused = await assertRejects(async () =>
      await broker.publish("orders", bytes("refused"))
    );
    assertEquals((refused as BrokerError).code, "storage_failed");
    assert(refused.message.startsWith('Cannot publish to "orders": its log failed ('));
    assertEquals(statusOf((refused as BrokerError).code), 503);
    const batch = await assertRejects(async () =>
      await broker.publishBatch("orders", [{ payload: bytes("b") }])
    );
    assertEquals((batch as BrokerError).code, "storage_failed");

    assertEquals(topic.messages.size, 1, "only what was durable before the failure");
    assertEquals(wire(broker.peek("orders")).map(text), [
      "kept",
    ]);
    const consumed = await assertRejects(async () => await broker.consume("orders"));
    assertEquals((consumed as BrokerError).code, "storage_failed");
    assertEquals(topic.defaultGroup.inFlightCount, 0, "nothing handed out");
    assertEquals(broker.healthy, false);
  } finally {
    await broker.close();
    await Deno.remove(dir, { recursive: true });
  }
});
