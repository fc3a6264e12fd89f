import { assertEquals } from "../../_support/assert.ts";
import { Broker } from "../../../lib/broker.ts";
import { defaultConfig, IDEMPOTENCY_WINDOW_MS as W, MAX_ATTEMPTS } from "../../../lib/config.ts";
import { MemoryWal } from "../../../lib/storage/memory_wal.ts";
import type { Appended } from "../../../lib/storage/wal.ts";
import { RecordType, type WalRecord } from "../../../lib/storage/record.ts";
import { bytes, T0, texts } from "../_broker.ts";

/** A MemoryWal that remembers the type of every record appended to it. */
class RecordingWal extends MemoryWal {
  readonly types: RecordType[] = [];
  override append(record: WalRecord): Appended {
    this.types.push(record.type);
    return super.append(record);
  }
}

/** A broker on a hand-driven clock whose topics' WALs record what is written to them. */
async function open() {
  const wals = new Map<string, RecordingWal>();
  let now = T0;
  const broker = await Broker.open(defaultConfig({ dataDir: ":memory:", visibilityMs: 1_000 }), {
    clock: () => now,
    tick: false,
    openWal: (name) => {
      const wal = new RecordingWal();
      wals.set(name, wal);
      return wal;
    },
  });
  return {
    broker,
    /** Record types written to a topic's WAL since `from`. */
    written: (name: string, from = 0) => wals.get(name)?.types.slice(from) ?? [],
    /** Sets the clock without sweeping. */
    at(t: number) {
      now = t;
    },
  };
}

Deno.test("Scheduler.sweepLocal() expires TTLs, promotes delays and drops keys past their window", async () => {
  const { broker: b } = await open();
  await b.publish("t", bytes("ttl"), { ttlMs: 100 });
  await b.publish("t", bytes("later"), { delayMs: 200 });
  await b.publish("t", bytes("keyed"), { idempotencyKey: "k" });
  const topic = b.findTopic("t")!;
  const g = topic.defaultGroup;
  b.scheduler.sweepLocal(T0 + 99);
  assertEquals([topic.messages.size, g.readyCount, g.delayedCount], [3, 2, 1]);
  b.scheduler.sweepLocal(T0 + 100);
  assertEquals([topic.messages.size, topic.counters.expired], [2, 1]);
  b.scheduler.sweepLocal(T0 + 200);
  assertEquals([g.readyCount, g.delayedCount], [2, 0]);
  b.scheduler.sweepLocal(T0 + W - 1);
  assertEquals(topic.keys.size, 1);
  b.scheduler.sweepLocal(T0 + W);
  assertEquals(topic.keys.size, 0);
  await b.close();
});

Deno.test("Scheduler.sweepLocal() hands a delay that came due to a long-poll, and times one out", async () => {
  const t = await open();
  const b = t.broker;
  await b.publish("t", bytes("later"), { delayMs: 500 });
  const woken = b.consume("t", { timeoutMs: 1_000 });
  b.scheduler.sweepLocal(T0 + 499);
  b.scheduler.sweepLocal(T0 + 500);
  assertEquals(texts(await woken), ["later"]);
  const timedOut = b.consume("t", { timeoutMs: 1_000 });
  b.scheduler.sweepLocal(T0 + 999);
  assertEquals(b.consumers.count(b.findTopic("t")!), 1);
  b.scheduler.sweepLocal(T0 + 1_000);
  assertEquals(await timedOut, []);
  await b.close();
});

Deno.test("Scheduler.sweepLocal() never turns an ended lease into a record; sweep() does", async () => {
  const t = await open();
  const b = t.broker;
  await b.publish("t", bytes("x"));
  await b.consume("t");
  const topic = b.findTopic("t")!;
  const before = t.written("t").length;
  b.scheduler.sweepLocal(T0 + 60_000);
  assertEquals(topic.defaultGroup.inFlightCount, 1, "a follower leaves the lease to its leader");
  assertEquals([t.written("t", before), topic.counters.requeued], [[], 0]);
  b.scheduler.sweep(T0 + 60_000);
  assertEquals(t.written("t", before), [RecordType.Requeue]);
  assertEquals([topic.defaultGroup.readyCount, topic.counters.requeued], [1, 1]);
  t.at(T0 + 60_000);
  const [again] = await b.consume("t");
  assertEquals([again?.retryCount, again?.reason], [1, "visibility timeout"]);
  await b.close();
});

Deno.test("Scheduler.sweep() dead-letters a lease that ends on the last attempt; sweepLocal() never", async () => {
  const t = await open();
  const b = t.broker;
  const { id } = await b.publish("jobs", bytes("x"));
  let now = T0;
  for (let attempt = 0; attempt < MAX_ATTEMPTS - 1; attempt++) {
    await b.consume("jobs");
    now += 1_000;
    b.scheduler.sweep(now);
    t.at(now);
  }
  await b.consume("jobs");
  const before = t.written("jobs").length;
  b.scheduler.sweepLocal(now + 1_000);
  assertEquals(b.findTopic("jobs.dlq"), undefined);
  assertEquals(t.written("jobs", before), []);
  b.scheduler.sweep(now + 1_000);
  assertEquals(t.written("jobs", before), [RecordType.Ack]);
  assertEquals(t.written("jobs.dlq"), [RecordType.Meta, RecordType.Publish]);
  assertEquals([...b.findTopic("jobs.dlq")!.messages.keys()], [id]);
  assertEquals(b.findTopic("jobs")!.messages.size, 0);
  await b.close();
});

Deno.test("Scheduler.sweep() skips a lease that was acked or touched before it ended", async () => {
  const t = await open();
  const b = t.broker;
  const { id: acked } = await b.publish("t", bytes("a"));
  const { id: touched } = await b.publish("t", bytes("b"));
  await b.consume("t", { limit: 2 });
  await b.ack("t", "", [acked]);
  t.at(T0 + 500);
  b.touch("t", "", touched, 5_000);
  const before = t.written("t").length;
  b.scheduler.sweep(T0 + 1_000);
  assertEquals(t.written("t", before), [], "the stale lease entries are skipped");
  assertEquals(b.findTopic("t")!.defaultGroup.inFlightCount, 1);
  b.scheduler.sweep(T0 + 5_500);
  assertEquals(t.written("t", before), [RecordType.Requeue]);
  await b.close();
});

Deno.test("Scheduler.sweep() and sweepLocal() move the memory drain-rate estimate", async () => {
  const t = await open();
  const b = t.broker;
  const { id } = await b.publish("t", new Uint8Array(10_000));
  b.scheduler.sweepLocal(T0);
  await b.consume("t");
  await b.ack("t", "", [id]);
  b.scheduler.sweepLocal(T0 + 1_000);
  const rate = b.memory.drainRate;
  assertEquals(rate > 0, true, `drain rate ${rate}`);
  b.scheduler.sweep(T0 + 2_000);
  assertEquals(b.memory.drainRate < rate, true, "nothing freed since: the estimate decays");
  await b.close();
});

Deno.test("Scheduler.nextDue() is the earliest live deadline; stale lease ends and served waits drop out", async () => {
  const t = await open();
  const b = t.broker;
  assertEquals(b.scheduler.nextDue(true), Infinity, "nothing pending");
  await b.publish("t", bytes("later"), { delayMs: 500 });
  await b.publish("t", bytes("ttl"), { ttlMs: 2_000 });
  assertEquals(b.scheduler.nextDue(true), T0 + 500);
  const [m] = await b.consume("t"); // "ttl", leased for 1 s
  assertEquals(b.scheduler.nextDue(true), T0 + 500);
  assertEquals(b.scheduler.nextDue(false), T0 + 500, "a follower's lease ends are its leader's");
  b.scheduler.sweep(T0 + 500); // the delay comes due
  assertEquals(b.scheduler.nextDue(true), T0 + 1_000, "the lease end");
  assertEquals(b.scheduler.nextDue(false), T0 + 2_000, "the TTL");
  await b.ack("t", "", [m!.msg.id]);
  assertEquals(b.scheduler.nextDue(true), Infinity, "the acked lease and its message are gone");
  const [d] = await b.consume("t", { limit: 1 });
  await b.ack("t", "", [d!.msg.id]);
  const waiting = b.consume("t", { timeoutMs: 3_000 });
  assertEquals(b.scheduler.nextDue(true), T0 + 3_000, "the long-poll's deadline");
  await b.publish("t", bytes("now"));
  assertEquals(texts(await waiting), ["now"]);
  assertEquals(b.scheduler.nextDue(true), T0 + 1_000, "the served wait no longer counts");
  await b.close();
});

Deno.test("Broker.nextDue() adds the next rates sample to the topics' deadlines", async () => {
  const t = await open();
  const b = t.broker;
  b.sweep(T0);
  assertEquals(b.nextDue(), T0 + 5_000, "nothing pending but the next rates sample");
  await b.publish("t", bytes("later"), { delayMs: 100 });
  assertEquals(b.nextDue(), T0 + 100);
  await b.close();
});
