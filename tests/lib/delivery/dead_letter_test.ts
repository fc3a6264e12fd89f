import { DelegatingWal } from "../../_support/wal.ts";
import { originGroups } from "../../../lib/topic.ts";
import { assert, assertEquals, assertRejects } from "../../_support/assert.ts";
import { Broker } from "../../../lib/broker.ts";
import { defaultConfig, MAX_ATTEMPTS } from "../../../lib/config.ts";
import { deadLetter, dlqName, exhausted, redrive } from "../../../lib/delivery/dead_letter.ts";
import { take } from "../../../lib/delivery/deliveries.ts";
import { silentLogger } from "../../../lib/log.ts";
import { heldSize } from "../../../lib/memory/budget.ts";
import { FileWal } from "../../../lib/storage/file_wal.ts";
import type { Appended, Wal, WalInit } from "../../../lib/storage/wal.ts";
import { RecordType, type WalRecord } from "../../../lib/storage/record.ts";
import { replayFile } from "../../../lib/storage/replay.ts";
import { bytes, openBroker, T0, text, texts } from "../_broker.ts";

type B = Awaited<ReturnType<typeof openBroker>>["broker"];

/** Indexes into PRIORITIES. */
const HIGH = 0, NORMAL = 1, LOW = 2;

const spec1 = { limit: 1, filter: undefined, peek: false, visibilityMs: 1_000 };

/** Leases every ready message of `group` on `name` and moves each to the DLQ. */
async function deadLetterAll(b: B, name: string, group = "", reason = "poison") {
  const topic = b.findTopic(name)!;
  const g = topic.groups.get(group)!;
  const spec = { limit: 1000, filter: undefined, peek: false, visibilityMs: 1_000 };
  const taken = take(topic, g, spec, b.now());
  const dlq = b.getTopic(dlqName(name));
  await Promise.all(
    taken.map((d) => deadLetter(b, topic, g, d, dlq, MAX_ATTEMPTS, reason, b.now())),
  );
}

Deno.test("dlqName() and exhausted(): the third attempt dead-letters, never from a DLQ", async () => {
  const t = await openBroker();
  const jobs = t.broker.getTopic("jobs");
  const dlq = t.broker.getTopic(dlqName("jobs"));
  assertEquals(dlq.name, "jobs.dlq");
  assertEquals([exhausted(jobs, MAX_ATTEMPTS - 1), exhausted(jobs, MAX_ATTEMPTS)], [false, true]);
  assertEquals(exhausted(dlq, MAX_ATTEMPTS + 10), false);
  await t.close();
});

Deno.test("deadLetter() moves a delivery keeping id, payload, headers, priority and origin", async () => {
  const t = await openBroker();
  const b = t.broker;
  await b.createGroup("orders", "billing");
  const { id } = await b.publish("orders", bytes("x"), {
    headers: ["x-mq-k", "v"],
    priority: 0,
    ttlMs: 60_000,
  });
  await deadLetterAll(b, "orders", "billing", "bad card");
  const orders = b.findTopic("orders")!;
  assertEquals(orders.counters.deadLettered, 1);
  assertEquals(orders.groups.get("billing")!.held, 0);
  assertEquals(orders.defaultGroup.readyCount, 1, "the default group keeps its copy");
  const [dead] = await b.consume("orders.dlq", { peek: true });
  assertEquals(dead?.msg.id, id);
  assertEquals(text(dead!.msg.readPayload()), "x");
  assertEquals(dead?.msg.headers, ["x-mq-k", "v"]);
  assertEquals([dead?.msg.priority, dead?.retryCount, dead?.reason], [
    HIGH,
    MAX_ATTEMPTS,
    "bad card",
  ]);
  assertEquals(b.findTopic("orders.dlq")!.messages.get(id)!.origin, "billing");
  assertEquals(dead?.msg.expiresAt, 0, "a dead letter waits for inspection: no TTL");
  // The default group dead-letters it too: still one message, which now names both groups.
  await deadLetterAll(b, "orders");
  assertEquals(b.findTopic("orders.dlq")!.messages.size, 1, "one message");
  assertEquals(originGroups(b.findTopic("orders.dlq")!.messages.get(id)!.origin), [
    "billing",
    "",
  ]);
  assertEquals(orders.messages.size, 0);
  await t.close();
});

Deno.test("deadLetter() hands the moved message to a consumer waiting on the DLQ", async () => {
  const t = await openBroker();
  const b = t.broker;
  await b.publish("jobs", bytes("x"));
  const waiting = b.consume("jobs.dlq", { timeoutMs: 10_000 });
  await deadLetterAll(b, "jobs");
  const [m] = await waiting;
  assertEquals([text(m!.msg.readPayload()), m?.retryCount], ["x", MAX_ATTEMPTS]);
  await t.close();
});

/** A real FileWal whose appends, while `held`, are reported durable only once released. */
class SlowFsync extends DelegatingWal {
  held = false;
  #release = Promise.withResolvers<void>();
  release(): void {
    this.held = false;
    this.#release.resolve();
  }
  override append(record: WalRecord, after?: Promise<unknown>): Appended {
    const written = this.inner.append(record, after);
    if (!this.held) return written;
    const released = this.#release.promise;
    written.durable = written.durable.then(() => released);
    return written;
  }
}

/** The record types (and ids) a WAL file holds, in order. */
async function records(path: string): Promise<string[]> {
  const out: string[] = [];
  await replayFile(path, (r) => {
    if (r.type === RecordType.Publish) out.push(`publish ${text(r.payload)}`);
    else if (r.type === RecordType.Ack) out.push(`ack ${r.ids.length}`);
    else if (r.type === RecordType.Meta) out.push("meta");
  }, silentLogger);
  return out;
}

Deno.test("deadLetter() writes the DLQ copy durably before the source's removal reaches disk", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ferry-twin-" });
  const config = defaultConfig({ dataDir: dir });
  const wals = new Map<string, SlowFsync>();
  const openWal = (name: string, init: WalInit): Wal => {
    const inner = new FileWal(`${dir}/${name}.wal`, dir, init.size, {
      fsync: "always",
      log: silentLogger,
      after: init.after,
      replayed: init.replayed,
    });
    const wal = new SlowFsync(inner);
    wals.set(name, wal);
    return wal;
  };
  const now = T0;
  const b = await Broker.open(config, { clock: () => now, tick: false, openWal });
  const { id } = await b.publish("jobs", bytes("x"), { headers: ["x-mq-k", "v"] });
  const jobs = b.findTopic("jobs")!;
  const dlq = b.getTopic("jobs.dlq");
  wals.get("jobs.dlq")!.held = true; // the DLQ's fsync is slow
  const [d] = take(jobs, jobs.defaultGroup, spec1, now);
  const done = deadLetter(b, jobs, jobs.defaultGroup, d!, dlq, MAX_ATTEMPTS, "poison", now);
  await wals.get("jobs.dlq")!.inner.barrier(); // the copy is written, not yet reported durable
  assertEquals(await records(`${dir}/jobs.dlq.wal`), ["meta", "publish x"]);
  assertEquals(await records(`${dir}/jobs.wal`), ["meta", "publish x"], "no removal yet");
  wals.get("jobs.dlq")!.release();
  await done;
  assertEquals(await records(`${dir}/jobs.wal`), ["meta", "publish x", "ack 1"]);
  await b.close();

  const again = await Broker.open(config, { clock: () => now, tick: false });
  assertEquals(again.findTopic("jobs")!.messages.size, 0);
  const [dead] = await again.consume("jobs.dlq", { peek: true });
  assertEquals([dead?.msg.id, text(dead!.msg.readPayload()), dead?.msg.headers, dead?.reason], [
    id,
    "x",
    ["x-mq-k", "v"],
    "poison",
  ]);
  await again.close();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("redrive() moves the DLQ back with retry_count 0 and redrive_count + 1, to its origin group", async () => {
  const t = await openBroker();
  const b = t.broker;
  await b.createGroup("orders", "billing");
  await b.publish("orders", bytes("billed"));
  await deadLetterAll(b, "orders", "billing");
  await b.consume("orders", { autoAck: true }); // the default group is done with "billed"
  await b.publish("orders", bytes("both"), { priority: 2 });
  await deadLetterAll(b, "orders");
  await deadLetterAll(b, "orders", "billing");
  assertEquals(b.findTopic("orders")!.messages.size, 0);
  assertEquals(await redrive(b, "orders"), { topic: "orders", source: "orders.dlq", moved: 2 });
  assertEquals(b.findTopic("orders.dlq")!.messages.size, 0);
  const billing = await b.consume("orders", { group: "billing", limit: 10, autoAck: true });
  assertEquals(
    billing.map((
      m,
    ) => [text(m.msg.readPayload()), m.retryCount, m.msg.redriveCount, m.msg.priority]),
    [
      ["billed", 0, 1, NORMAL],
      ["both", 0, 1, LOW],
    ],
  );
  // "both" was dead-lettered by the default group first (no origin): it returns to every group.
  assertEquals(texts(await b.consume("orders", { limit: 10 })), ["both"]);
  await t.close();
});

Deno.test("redrive() counts the redrive on a message another group still holds, also after replay", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ferry-twin-" });
  const t = await openBroker({ dataDir: dir });
  const b = t.broker;
  await b.createGroup("orders", "ledger");
  await b.publish("orders", bytes("kept"));
  await deadLetterAll(b, "orders", "ledger"); // the default group still holds "kept"
  assertEquals(await redrive(b, "orders"), { topic: "orders", source: "orders.dlq", moved: 1 });
  const [back] = await b.consume("orders", { group: "ledger" });
  assertEquals([text(back!.msg.readPayload()), back!.retryCount, back!.msg.redriveCount], [
    "kept",
    0,
    1,
  ]);
  await t.close();
  const again = await openBroker({ dataDir: dir }, t.now);
  const [held] = await again.broker.consume("orders");
  assertEquals(held!.msg.redriveCount, 1, "the default group's copy, after replay");
  await again.close();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("redrive() moves only as many as the target has room for: max_messages, max_bytes", async () => {
  const t = await openBroker();
  const b = t.broker;
  await b.createTopic("few", { maxMessages: 2 });
  await b.createTopic("small", { maxBytes: 2 * heldSize(4) });
  for (const name of ["few", "small"]) {
    for (const p of ["m1..", "m2..", "m3.."]) {
      await b.publish(name, bytes(p));
      await deadLetterAll(b, name);
    }
    await b.publish(name, bytes("held"));
    assertEquals((await redrive(b, name)).moved, 1, name);
    assertEquals(b.findTopic(`${name}.dlq`)!.messages.size, 2, name);
    const back = await b.consume(name, { limit: 10, peek: true });
    assertEquals(texts(back), ["held", "m1.."], `${name}: oldest first`);
  }
  await t.close();
});

Deno.test("redrive() with ids moves only those, once each, skipping ids the DLQ does not hold", async () => {
  const t = await openBroker();
  const b = t.broker;
  const ids: string[] = [];
  for (const p of ["a", "b", "c"]) ids.push((await b.publish("jobs", bytes(p))).id);
  await deadLetterAll(b, "jobs");
  const moved = await redrive(b, "jobs", [ids[2]!, "not-an-id", ids[0]!, ids[2]!]);
  assertEquals(moved, { topic: "jobs", source: "jobs.dlq", moved: 2 });
  assertEquals(texts(await b.consume("jobs", { limit: 10, peek: true })), ["c", "a"]);
  assertEquals([...b.findTopic("jobs.dlq")!.messages.keys()], [ids[1]!], "b stays dead-lettered");
  assertEquals((await redrive(b, "jobs", [])).moved, 0);
  await t.close();
});

Deno.test("redrive() takes the topic or its DLQ, refuses an unknown one, moves nothing from none", async () => {
  const t = await openBroker();
  const b = t.broker;
  await assertRejects(() => redrive(b, "ghost"), "not_found");
  await b.publish("jobs", bytes("x"));
  assertEquals(await redrive(b, "jobs"), { topic: "jobs", source: "jobs.dlq", moved: 0 });
  assertEquals(b.findTopic("jobs.dlq"), undefined, "no DLQ is created to redrive from");
  await deadLetterAll(b, "jobs");
  assertEquals(await redrive(b, "jobs.dlq"), { topic: "jobs", source: "jobs.dlq", moved: 1 });
  assert(b.findTopic("jobs")!.messages.size === 1);
  await t.close();
});

Deno.test({
  // Regression (found by this twin): a DLQ message keeps the origin of the first group that dead-lettered it. When a second
  // group dead-letters the same message, move() merges into it and the origin stays the first
  // group's, so redrive() returns the message to that group only: the other group never gets
  // it back (lost for that group). Dead-lettered from the default group first, the origin is
  // undefined and redrive goes to every group, so the bug depends on the order.
  name: "redrive() returns a message dead-lettered by two groups to both of them",
  fn: async () => {
    const t = await openBroker();
    const b = t.broker;
    await b.createGroup("orders", "billing");
    await b.publish("orders", bytes("x"));
    await deadLetterAll(b, "orders", "billing");
    await deadLetterAll(b, "orders");
    assertEquals((await redrive(b, "orders")).moved, 1);
    assertEquals((await b.consume("orders", { group: "billing" })).length, 1);
    assertEquals((await b.consume("orders")).length, 1, "the default group gets it back too");
    await t.close();
  },
});
