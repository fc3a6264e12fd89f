import { assert, assertEquals } from "../../_support/assert.ts";
import type { Handed } from "../../../lib/broker.ts";
import { PayloadFile, prefetchPayloads } from "../../../lib/memory/payload_file.ts";
import { messageJson } from "../../../routes/wire.ts";
import { openBroker, publishThroughCompaction } from "../_broker.ts";

const wire = (ms: Handed[]) => ms.map(messageJson);
const bytes = (s: string) => new TextEncoder().encode(s);
const KIB = 1024;

/** A payload of `n` bytes that says which message it is. */
function payloadOf(i: number, n = KIB): string {
  return `${i}:`.padEnd(n, String.fromCharCode(97 + (i % 26)));
}

Deno.test("the payload cache keeps the newest durable payloads in memory, the rest read from the file", async () => {
  const t = await openBroker({ dataDir: "temp", payloadCacheBytes: 4 * KIB });
  const b = t.broker;
  const sent: string[] = [];
  for (let i = 0; i < 20; i++) {
    sent.push(payloadOf(i));
    await b.publish("c", bytes(sent[i]!));
  }
  const topic = b.findTopic("c")!;
  const msgs = [...topic.messages.values()];
  assertEquals(msgs.map((m) => m.onDisk), [...Array(16).fill(true), ...Array(4).fill(false)]);
  assert(msgs.every((m) => m.file !== undefined), "every durable payload knows its place");
  assertEquals(b.memory.cache.bytes, 4 * KIB);
  // Only the cached payloads and the overhead count against BROKER_MAX_MEMORY.
  assertEquals(topic.heldBytes, 4 * KIB + 20 * 512);
  const got = await b.consume("c", { limit: 20 }, wire);
  assertEquals(got.map((m) => m.payload_text), sent);
  await b.close();
  // After a restart the oldest (consumed next) are in memory while they fit, the rest stay in
  // the file; they read back the same.
  const again = await openBroker({ dataDir: t.dir, payloadCacheBytes: 4 * KIB });
  const replayed = again.broker.findTopic("c")!;
  assertEquals(
    [...replayed.messages.values()].map((m) => m.onDisk),
    [...Array(4).fill(false), ...Array(16).fill(true)],
  );
  assertEquals(replayed.heldBytes, 4 * KIB + 20 * 512);
  await again.broker.publish("c", bytes(payloadOf(20)));
  assertEquals(replayed.messages.values().next().value!.onDisk, true, "the oldest leaves first");
  const peeked = await again.broker.consume("c", { peek: true, limit: 20 }, wire);
  assertEquals(peeked.map((m) => m.payload_text), sent);
  await again.close();
  await Deno.remove(t.dir, { recursive: true });
});

Deno.test("payloads in memory and on disk read right across compactions racing publishes", async () => {
  const t = await openBroker({
    dataDir: "temp",
    payloadCacheBytes: 8 * KIB,
    compactMinBytes: 0,
    compactRatio: 2,
  });
  const b = t.broker;
  const sent = new Map<string, string>();
  const publishOne = async (i: number) => {
    const text = payloadOf(i, 100 + (i * 37) % 2000);
    sent.set((await b.publish("d", bytes(text))).id, text);
  };
  const check = async (what: string) => {
    const held = await b.consume("d", { peek: true, limit: 1000 }, wire);
    assertEquals(held.length, sent.size, `${what}: count`);
    for (const m of held) assertEquals(m.payload_text, sent.get(m.id), `${what}: ${m.id}`);
  };
  for (let i = 0; i < 60; i++) await publishOne(i);
  const topic = b.findTopic("d")!;
  for (let round = 1; round <= 3; round++) {
    const ids = [...sent.keys()].slice(0, 40);
    await b.ack("d", "", ids);
    for (const id of ids) sent.delete(id);
    await publishThroughCompaction(t, topic, publishOne, round * 1000);
    // Few publishes may race a quick compaction, and what is held may then fit the cache: publish
    // on until more than the cache is held, so that both kinds are read across the new file.
    const bothKinds = () => {
      const msgs = [...topic.messages.values()];
      return msgs.some((m) => m.onDisk) && msgs.some((m) => !m.onDisk);
    };
    for (let i = 0; i < 20 && !bothKinds(); i++) await publishOne(round * 1000 + 100 + i);
    assert(bothKinds(), `round ${round}: both kinds are held`);
    await check(`after compaction ${round}`);
    // Evicting now reads from the new file: publish enough to push every cached payload out.
    for (let i = 0; i < 10; i++) await publishOne(round * 1000 + 500 + i);
    await check(`after evicting past compaction ${round}`);
    const inMemory = [...topic.messages.values()].filter((m) => !m.onDisk);
    assert(
      inMemory.reduce((n, m) => n + m.payloadBytes, 0) <= 8 * KIB,
      "every payload in memory is in the cache: none is stuck there",
    );
  }
  await b.close();
  const again = await openBroker({ dataDir: t.dir, payloadCacheBytes: 8 * KIB });
  const held = await again.broker.consume("d", { peek: true, limit: 1000 }, wire);
  assertEquals(held.length, sent.size);
  for (const m of held) assertEquals(m.payload_text, sent.get(m.id));
  await again.close();
  await Deno.remove(t.dir, { recursive: true });
});

Deno.test("the payload cache lets go of purged messages at the next sweep, not at the next publish", async () => {
  const t = await openBroker({ dataDir: "temp", payloadCacheBytes: 64 * KIB });
  for (let i = 0; i < 20; i++) await t.broker.publish("p", bytes(payloadOf(i)));
  assertEquals(t.broker.memory.cache.size, 20);
  await t.broker.purge("p");
  t.advance(10);
  assertEquals([t.broker.memory.cache.size, t.broker.memory.cache.bytes], [0, 0]);
  await t.close();
});

Deno.test("a :memory: broker keeps every payload in memory whatever BROKER_PAYLOAD_CACHE says", async () => {
  const t = await openBroker({ payloadCacheBytes: KIB });
  for (let i = 0; i < 5; i++) await t.broker.publish("m", bytes(payloadOf(i)));
  assert([...t.broker.findTopic("m")!.messages.values()].every((m) => !m.onDisk));
  await t.close();
});

Deno.test("prefetchPayloads() reads a batch's stretch of the file once; reads inside it are views", async () => {
  const path = await Deno.makeTempFile();
  const data = new Uint8Array(64 * KIB).map((_, i) => i % 251);
  await Deno.writeFile(path, data);
  const file = PayloadFile.open(path);
  const at = (fileOffset: number, payloadBytes: number) => ({
    onDisk: true,
    file,
    fileOffset,
    payloadBytes,
  });
  const batch = [at(100, 1000), at(1200, 1000), at(2300, 500)];
  prefetchPayloads(batch);
  const views = batch.map((m) => file.read(m.fileOffset, m.payloadBytes));
  assert(views.every((v) => v.buffer === views[0]!.buffer), "one read buffer");
  batch.forEach((m, i) =>
    assertEquals(views[i], data.subarray(m.fileOffset, m.fileOffset + m.payloadBytes))
  );
  // Outside the stretch: a read of its own, still exact.
  const outside = file.read(40_000, 10);
  assert(outside.buffer !== views[0]!.buffer);
  assertEquals(outside, data.subarray(40_000, 40_010));
  // The next batch's stretch reuses the buffer; the first batch's bytes are then read anew.
  const next = [at(30_000, 1000), at(31_100, 1000)];
  prefetchPayloads(next);
  next.forEach((m) =>
    assertEquals(
      file.read(m.fileOffset, m.payloadBytes),
      data.subarray(m.fileOffset, m.fileOffset + m.payloadBytes),
    )
  );
  batch.forEach((m) =>
    assertEquals(
      file.read(m.fileOffset, m.payloadBytes),
      data.subarray(m.fileOffset, m.fileOffset + m.payloadBytes),
    )
  );
  // Far apart: no stretch is read (it would be mostly other bytes).
  prefetchPayloads([at(0, 10), at(60_000, 10)]);
  assertEquals(file.read(0, 10), data.subarray(0, 10));
  file.close();
  await Deno.remove(path);
});
