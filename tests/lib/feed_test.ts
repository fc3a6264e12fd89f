import { DelegatingWal } from "../_support/wal.ts";
import { assert, assertEquals, assertThrows } from "../_support/assert.ts";
import { Broker } from "../../lib/broker.ts";
import { type Config, defaultConfig } from "../../lib/config.ts";
import type { FeedEvent } from "../../lib/feed.ts";
import { FileWal } from "../../lib/storage/file_wal.ts";
import type { Appended, OpenWal, Wal, WalInit } from "../../lib/storage/wal.ts";
import type { WalRecord } from "../../lib/storage/record.ts";
import { silentLogger } from "../../lib/log.ts";

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (e: FeedEvent) =>
  e.kind === "message" || e.kind === "broadcast"
    ? new TextDecoder().decode(e.msg.readPayload())
    : e.kind;

/** Events a listener heard, and a way to wait for the n-th. */
function collector() {
  const events: FeedEvent[] = [];
  const waiting: { n: number; resolve: () => void }[] = [];
  return {
    events,
    fn: (e: FeedEvent) => {
      events.push(e);
      for (const w of waiting.splice(0)) {
        if (events.length >= w.n) w.resolve();
        else waiting.push(w);
      }
    },
    /** Resolves once `n` events have been heard. */
    heard(n: number): Promise<void> {
      if (events.length >= n) return Promise.resolve();
      return new Promise((resolve) => waiting.push({ n, resolve }));
    },
  };
}

/** A broker on a temporary data dir (or `overrides.dataDir`); `close()` removes a dir it made. */
async function open(overrides: Partial<Config> = {}, openWal?: OpenWal) {
  const made = overrides.dataDir === undefined;
  const dataDir = overrides.dataDir ?? await Deno.makeTempDir({ prefix: "ferry-subs-" });
  let now = 1_000_000;
  const broker = await Broker.open(defaultConfig({ dataDir, ...overrides }), {
    clock: () => now,
    openWal,
  });
  return {
    broker,
    dataDir,
    advance(ms: number) {
      now += ms;
      broker.sweep(now);
    },
    async close() {
      await broker.close();
      if (made) await Deno.remove(dataDir, { recursive: true });
    },
  };
}

/** Lets every queued microtask and promise callback run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await undefined;
}

Deno.test("Feed: orders.* hears a topic created after it subscribed", async () => {
  const t = await open();
  const c = collector();
  t.broker.feed.subscribe("orders.*", c.fn);
  await t.broker.publish("orders.eu", bytes("a"));
  await t.broker.publish("billing", bytes("not mine"));
  await t.broker.publish("orders.us", bytes("b"));
  await c.heard(2);
  assertEquals(c.events.map((e) => [(e as { topic: string }).topic, text(e)]), [
    ["orders.eu", "a"],
    ["orders.us", "b"],
  ]);
  await t.close();
});

Deno.test("Feed: a subscriber hears a dead-letter move and a redrive, copy first", async () => {
  const t = await open({ visibilityMs: 1_000 });
  const c = collector();
  t.broker.feed.subscribe("orders.*", c.fn);
  const published = await t.broker.publish("orders.eu", bytes("job"));
  for (let attempt = 0; attempt < 3; attempt++) {
    assertEquals((await t.broker.consume("orders.eu")).length, 1);
    t.advance(1_000); // the lease ends; the third end moves it to the DLQ
  }
  await t.broker.findTopic("orders.eu.dlq")!.wal.barrier();
  await t.broker.findTopic("orders.eu")!.wal.barrier();
  assertEquals((await t.broker.redrive("orders.eu")).moved, 1);
  await c.heard(3);
  const seen = c.events.map((e) => {
    assert(e.kind === "message");
    return [e.topic, e.msg.id, e.retryCount, e.reason ?? ""];
  });
  assertEquals(seen, [
    ["orders.eu", published.id, 0, ""],
    ["orders.eu.dlq", published.id, 3, "visibility timeout"],
    ["orders.eu", published.id, 0, ""],
  ]);
  await t.close();
});

Deno.test("Feed: sequence numbers only grow within a topic", async () => {
  const t = await open();
  const c = collector();
  t.broker.feed.subscribe("jobs", c.fn);
  for (const s of ["a", "b", "c"]) await t.broker.publish("jobs", bytes(s));
  await c.heard(3);
  const seqs = c.events.map((e) => (e as { seq: number }).seq);
  assert(seqs[0]! < seqs[1]! && seqs[1]! < seqs[2]!, `seqs ${seqs}`);
  await t.close();
});

/** A real FileWal whose batches wait, while `gate()` gives a promise, until it settles. */
class GatedWal extends DelegatingWal {
  constructor(inner: FileWal, private readonly gate: () => Promise<void> | undefined) {
    super(inner);
  }
  override append(record: WalRecord, after?: Promise<unknown>): Appended {
    const gate = this.gate();
    return this.inner.append(record, gate ? (after ? Promise.all([after, gate]) : gate) : after);
  }
}

/**
 * Real FileWals whose writes wait for `release()`: what is appended meanwhile is queued in the
 * writer, not on disk, as a batch is not durable before its write and fsync.
 */
function heldDisk(dataDir: string) {
  const gate = Promise.withResolvers<void>();
  let holding = true;
  const openWal: OpenWal = (name: string, init: WalInit): Wal => {
    const wal = new FileWal(`${dataDir}/${name}.wal`, dataDir, init.size, {
      fsync: "always",
      log: silentLogger,
      onDurable: init.onDurable,
      after: init.after,
      replayed: init.replayed,
    });
    return new GatedWal(wal, () => holding ? gate.promise : undefined);
  };
  return {
    openWal,
    release() {
      holding = false;
      gate.resolve();
    },
  };
}

Deno.test({
  name: "Feed: nothing is heard before it is durable, and a lost write is never heard",
  // The first broker dies with its write still queued: its file and flush stay open.
  sanitizeOps: false,
  sanitizeResources: false,
}, async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "ferry-subs-" });
  const setup = await open({ dataDir });
  await setup.broker.createTopic("jobs", {}); // the topic's META is on disk before we hold
  await setup.broker.close();

  const disk = heldDisk(dataDir);
  const t = await open({ dataDir }, disk.openWal);
  const c = collector();
  t.broker.feed.subscribe("jobs", c.fn);
  const answered = t.broker.publish("jobs", bytes("never synced"));
  let answeredYet = false;
  answered.then(() => answeredYet = true);
  await settle();
  assertEquals([c.events.length, answeredYet], [0, false]);
  // The process dies here (it is abandoned, never closed): the write never reached the disk,
  // and the kernel drops the data dir's lock.
  await t.broker.dataDirLock?.release();

  const after = await open({ dataDir });
  assertEquals(after.broker.findTopic("jobs")?.messages.size, 0, "the lost write is gone");
  await settle();
  assertEquals(c.events.length, 0, "and no subscriber ever heard it");
  await after.broker.close();
  // Only now is the abandoned broker let go, so that its files are closed before they go.
  disk.release();
  await answered;
  await t.broker.close();
  await Deno.remove(dataDir, { recursive: true });
});

Deno.test("Feed: a held write is heard once released, before the publisher's answer", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "ferry-subs-" });
  const disk = heldDisk(dataDir);
  const t = await open({ dataDir }, disk.openWal);
  const c = collector();
  const order: string[] = [];
  t.broker.feed.subscribe("jobs", (e) => {
    order.push(`heard ${text(e)}`);
    c.fn(e);
  });
  const answered = t.broker.publish("jobs", bytes("x")).then(() => order.push("answered"));
  await settle();
  assertEquals(c.events.length, 0);
  disk.release();
  await answered;
  await c.heard(1);
  assertEquals(order, ["heard x", "answered"]);
  await t.close();
  await Deno.remove(dataDir, { recursive: true });
});

Deno.test("Feed: afterSeq replays from the ring, else from what the topic holds, with a gap for what left", async () => {
  const t = await open({ streamBuffer: 3 });
  const live = collector();
  t.broker.feed.subscribe("jobs", live.fn); // the topic is streamed: its ring fills
  for (const s of ["1", "2", "3", "4", "5"]) await t.broker.publish("jobs", bytes(s));
  await live.heard(5);
  const seq = (i: number) => (live.events[i] as { seq: number }).seq;

  const resumed = collector();
  t.broker.feed.subscribe("jobs", resumed.fn, { afterSeq: seq(2) });
  await resumed.heard(2);
  assertEquals(resumed.events.map(text), ["4", "5"]);

  const lagging = collector();
  t.broker.feed.subscribe("jobs", lagging.fn, { afterSeq: seq(0) }); // "2" left the ring
  await lagging.heard(4);
  assertEquals(lagging.events.map(text), ["2", "3", "4", "5"], "the topic still holds them");
  assertEquals(lagging.events.map((e) => (e as { seq: number }).seq), [1, 2, 3, 4].map(seq));

  const [, two] = await t.broker.consume("jobs", { limit: 2 }); // "1" and "2", in flight
  await t.broker.ack("jobs", "", [two!.msg.id]);
  const after = collector();
  t.broker.feed.subscribe("jobs", after.fn, { afterSeq: seq(0) });
  await after.heard(4);
  assertEquals(after.events[0], { kind: "gap", topic: "jobs", afterSeq: seq(0), missed: 1 });
  assertEquals(after.events.slice(1).map(text), ["3", "4", "5"]);

  const current = collector();
  t.broker.feed.subscribe("jobs", current.fn, { afterSeq: seq(4) });
  await t.broker.publish("jobs", bytes("6"));
  await current.heard(1);
  assertEquals(current.events.map(text), ["6"], "nothing missed: only what comes next");

  const ahead = collector();
  t.broker.feed.subscribe("jobs", ahead.fn, { afterSeq: seq(4) + 100 });
  await ahead.heard(1);
  assertEquals(ahead.events[0]!.kind, "gap", "a number the topic never reached is a gap");
  assertThrows(
    () => t.broker.feed.subscribe("jobs.*", () => {}, { afterSeq: 1 }),
    "invalid_parameter",
  );
  await t.close();
});

Deno.test({
  name:
    "Feed: a resume after a restart sends what the topic holds (payloads read from disk) once, and a write only once durable",
  sanitizeOps: false,
  sanitizeResources: false,
}, async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "ferry-subs-" });
  const first = await open({ dataDir, diskPayloadMinBytes: 1 });
  const live = collector();
  first.broker.feed.subscribe("jobs", live.fn);
  for (const p of ["a", "b", "c"]) await first.broker.publish("jobs", bytes(p.repeat(100)));
  await live.heard(3);
  const seqs = live.events.map((e) => (e as { seq: number }).seq);
  await first.broker.close();

  const disk = heldDisk(dataDir);
  const t = await open({ dataDir, diskPayloadMinBytes: 1 }, disk.openWal);
  assert(t.broker.findTopic("jobs")!.messages.values().next().value!.onDisk, "payloads on disk");
  const stored = t.broker.publish("jobs", bytes("d")); // applied, not yet durable
  const resumed = collector();
  t.broker.feed.subscribe("jobs", resumed.fn, { afterSeq: seqs[0] });
  await resumed.heard(2);
  await settle();
  assertEquals(resumed.events.map(text), ["b".repeat(100), "c".repeat(100)]);
  assertEquals(resumed.events.map((e) => (e as { seq: number }).seq), seqs.slice(1));
  disk.release();
  await stored;
  await resumed.heard(3);
  await settle();
  assertEquals(resumed.events.map(text).slice(2), ["d"], "once, when durable");
  assert((resumed.events[2] as { seq: number }).seq > seqs[2]!);
  await t.close();
  await Deno.remove(dataDir, { recursive: true });
});

Deno.test("Feed: one that throws or falls behind is dropped and told; others go on", async () => {
  const t = await open();
  const good = collector();
  const told: string[] = [];
  t.broker.feed.subscribe("jobs", good.fn);
  t.broker.feed.subscribe("jobs", (e) => {
    if (e.kind === "dropped") told.push(`thrower: ${e.reason}`);
    else throw new Error("boom");
  });
  t.broker.feed.subscribe("jobs", (e) => {
    if (e.kind === "dropped") told.push(`stuck: ${e.reason}`);
    else return new Promise<void>(() => {}); // never finishes its first event
  }, { maxQueue: 2 });
  for (let i = 0; i < 6; i++) await t.broker.publish("jobs", bytes(`m${i}`));
  await good.heard(6);
  await settle();
  assertEquals(good.events.map(text), ["m0", "m1", "m2", "m3", "m4", "m5"]);
  assertEquals(told.sort(), [
    "stuck: fell behind: 2 events waiting",
    "thrower: the subscriber failed: boom",
  ]);
  assertEquals(t.broker.feed.count("jobs"), 1);
  await t.close();
});

Deno.test("Feed: a broadcast is heard without a sequence number and never stored", async () => {
  const t = await open();
  const c = collector();
  const unsubscribe = t.broker.feed.subscribe("*", c.fn);
  assertEquals(t.broker.broadcast("news", bytes("flash")), 1);
  await c.heard(1);
  assertEquals([c.events[0]!.kind, text(c.events[0]!)], ["broadcast", "flash"]);
  assertEquals(t.broker.findTopic("news"), undefined);
  unsubscribe();
  assertEquals(t.broker.broadcast("news", bytes("again")), 0);
  await t.close();
});

Deno.test("Feed.closeAll() (drain) ends every subscription with a closed event", async () => {
  const t = await open();
  const a = collector(), b = collector();
  t.broker.feed.subscribe("jobs", a.fn);
  t.broker.feed.subscribe("*", b.fn);
  await t.broker.drain();
  await a.heard(1);
  await b.heard(1);
  assertEquals([a.events, b.events], [[{ kind: "closed" }], [{ kind: "closed" }]]);
  assertEquals(t.broker.feed.count("jobs"), 0);
  await t.close();
});
