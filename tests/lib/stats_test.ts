import { assertEquals, assertRejects } from "../_support/assert.ts";
import { silentLogger } from "../../lib/log.ts";
import { addCounters, oldestAgeSeconds, Stats } from "../../lib/stats.ts";
import type { Topic } from "../../lib/topic.ts";
import { zeroCounters } from "../../lib/topic.ts";
import { FileWal } from "../../lib/storage/file_wal.ts";
import { RecordType } from "../../lib/storage/record.ts";
import { bytes, memTopic, openBroker, put, T0 } from "./_broker.ts";

Deno.test("Stats.topicFigures() counts ready, in flight and delayed per group, default first", async () => {
  const t = await openBroker();
  const b = t.broker;
  await b.createGroup("orders", "billing");
  await b.publish("orders", bytes("a"));
  await b.publish("orders", bytes("b"));
  t.set(T0 + 1_000);
  await b.publish("orders", bytes("later"), { delayMs: 60_000 });
  await b.consume("orders");
  await b.consume("orders", { group: "billing", limit: 2, autoAck: true });
  const f = b.stats.topicFigures(b.findTopic("orders")!, T0 + 2_500);
  assertEquals(f.groups.map((g) => [g.name, g.ready, g.inFlight, g.delayed]), [
    ["", 1, 1, 1],
    ["billing", 0, 0, 1],
  ]);
  assertEquals([f.name, f.ready, f.inFlight, f.delayed], ["orders", 1, 1, 1], "the default's");
  assertEquals([f.held, f.groupNames, f.dlqDepth], [3, ["billing"], 0]);
  assertEquals(f.oldestAgeSeconds, 2.5);
  assertEquals(f.groups[1]!.oldestAgeSeconds, 1.5, "billing holds only the delayed one");
  assertEquals(f.heldBytes, b.findTopic("orders")!.heldBytes);
  await t.close();
});

Deno.test("Stats.figures() lists every topic by name with the depth of its DLQ", async () => {
  const t = await openBroker({ visibilityMs: 1_000 });
  const b = t.broker;
  await b.publish("b", bytes("x"));
  await b.publish("a", bytes("x"));
  await b.publish("a", bytes("y"));
  for (let i = 0; i < 3; i++) {
    await b.consume("a", { limit: 2 });
    t.advance(1_000);
  }
  const figures = b.stats.figures(t.now);
  assertEquals(figures.map((f) => [f.name, f.held, f.dlqDepth]), [
    ["a", 0, 2],
    ["a.dlq", 2, 0],
    ["b", 1, 0],
  ]);
  assertEquals(figures[0]!.counters.deadLettered, 2);
  await t.close();
});

Deno.test("Stats.totals sums every topic's counters and keeps those of deleted topics", async () => {
  const t = await openBroker();
  const b = t.broker;
  await b.publish("x", bytes("1"));
  await b.publish("x", bytes("2"));
  await b.publish("y", bytes("3"));
  await b.consume("x", { autoAck: true });
  assertEquals([b.stats.totals.published, b.stats.totals.acked], [3, 1]);
  await b.deleteTopic("x");
  await b.publish("x", bytes("4")); // a new topic of the same name counts afresh
  const totals = b.stats.totals;
  assertEquals([totals.published, totals.delivered, totals.acked], [4, 1, 1]);
  assertEquals(b.findTopic("x")!.counters.published, 1);
  assertEquals(b.stats.totals.published, 4, "summed when asked, never accumulated twice");
  await t.close();
});

Deno.test("Stats.healthy turns false once any topic's WAL write has failed", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ferry-twin-" });
  const fine = memTopic("fine");
  // A real file WAL whose directory does not exist: its first write fails.
  const broken = memTopic(
    "broken",
    {},
    undefined,
    new FileWal(`${dir}/missing/broken.wal`, dir, 0, { fsync: "always", log: silentLogger }),
  );
  const topics: Topic[] = [fine];
  const stats = new Stats(() => topics, (n) => topics.find((t) => t.name === n));
  await put(fine, "m1", "x");
  topics.push(broken);
  assertEquals(stats.healthy, true, "nothing has failed yet");
  await assertRejects(() => put(broken, "m2", "y"));
  assertEquals(stats.healthy, false);
  await broken.wal.close();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("oldestAgeSeconds() is the age of the oldest message a group still holds", async () => {
  const topic = memTopic();
  const g = topic.defaultGroup;
  assertEquals(oldestAgeSeconds(topic, g, T0 + 9_000), 0, "holds nothing");
  await put(topic, "m1", "a", T0);
  await put(topic, "m2", "b", T0 + 4_000);
  assertEquals(oldestAgeSeconds(topic, g, T0 + 10_000), 10);
  await topic.commit({ type: RecordType.Ack, seq: topic.nextSeq(), group: "", ids: ["m1"] }, T0);
  assertEquals(oldestAgeSeconds(topic, g, T0 + 10_000), 6);
  assertEquals(oldestAgeSeconds(topic, g, T0), 0, "never negative under a clock step back");
});

Deno.test("addCounters() adds counter by counter", () => {
  const into = zeroCounters();
  const from = zeroCounters();
  from.published = 3;
  from.rejectedMemoryFull = 2;
  addCounters(into, from);
  addCounters(into, from);
  assertEquals(into, { ...zeroCounters(), published: 6, rejectedMemoryFull: 4 });
});
