import { assert, assertEquals, assertRejects, assertThrows } from "../../_support/assert.ts";
import { MAX_ATTEMPTS, MAX_PEEK } from "../../../lib/config.ts";
import {
  ack,
  ackIn,
  consume,
  leased,
  leaseEnded,
  peek,
  release,
  requeue,
  take,
  touch,
} from "../../../lib/delivery/deliveries.ts";
import { FILTER_SCAN_WINDOW, type TakeSpec } from "../../../lib/delivery/group.ts";
import { bytes, openBroker, T0, text, texts } from "../_broker.ts";

const lease = (limit: number, visibilityMs = 1_000): TakeSpec => ({
  limit,
  filter: undefined,
  peek: false,
  visibilityMs,
});

Deno.test("take() leases by priority then FIFO, stopping at maxBytes but always taking one", async () => {
  const t = await openBroker();
  const b = t.broker;
  await b.publish("t", bytes("low1"), { priority: 2 });
  await b.publish("t", bytes("nor1"));
  await b.publish("t", bytes("hig1"), { priority: 0 });
  await b.publish("t", bytes("nor2"));
  const topic = b.findTopic("t")!;
  const g = topic.defaultGroup;
  assertEquals(texts(take(topic, g, { ...lease(10), peek: true }, T0)), [
    "hig1",
    "nor1",
    "nor2",
    "low1",
  ]);
  assertEquals([g.readyCount, topic.counters.delivered], [4, 0], "a peek leases nothing");
  const first = take(topic, g, lease(10), T0, 10);
  assertEquals(texts(first), ["hig1", "nor1"], "a third 4-byte payload would pass 10 bytes");
  assertEquals(first.map((d) => d.at), [T0 + 1_000, T0 + 1_000]);
  assertEquals(texts(take(topic, g, lease(10), T0, 1)), ["nor2"], "one, even past maxBytes");
  assertEquals([g.readyCount, g.inFlightCount, topic.counters.delivered], [1, 3, 3]);
  await t.close();
});

Deno.test("take() drops the expired messages it meets on the way and counts them", async () => {
  const t = await openBroker();
  await t.broker.publish("t", bytes("short"), { ttlMs: 100 });
  await t.broker.publish("t", bytes("long"));
  const topic = t.broker.findTopic("t")!;
  t.set(T0 + 100); // no sweep: take() meets the expired message itself
  assertEquals(texts(take(topic, topic.defaultGroup, lease(10), t.now)), ["long"]);
  assertEquals([topic.counters.expired, topic.messages.size], [1, 1]);
  await t.close();
});

Deno.test("consume() with auto_ack acks what it handed over; a throwing handOver puts it back", async () => {
  const t = await openBroker();
  const b = t.broker;
  for (const p of ["a", "b", "c"]) await b.publish("t", bytes(p));
  const topic = b.findTopic("t")!;
  const boom = new Error("the answer could not be written");
  const e = await assertRejects(() =>
    consume(b, b.consumers, "t", { limit: 2, autoAck: true }, () => {
      throw boom;
    })
  );
  assertEquals(e, boom);
  assertEquals([topic.counters.delivered, topic.counters.acked], [0, 0]);
  assertEquals(topic.defaultGroup.inFlightCount, 0);
  // Put back at the head, in order, without an attempt counted.
  const got = await consume(b, b.consumers, "t", { limit: 2, autoAck: true }, (ms) => ms);
  assertEquals(texts(got), ["a", "b"]);
  assertEquals(got.map((m) => m.retryCount), [0, 0]);
  assertEquals([topic.messages.size, topic.counters.acked], [1, 2]);
  await t.close();
});

Deno.test("consume() long-polls: a publish wakes it, its timeout answers empty", async () => {
  const t = await openBroker();
  const b = t.broker;
  const none = await consume(b, b.consumers, "nobody", {}, (ms) => ms);
  assertEquals([none, b.findTopic("nobody")], [[], undefined], "no wait: no topic made");
  const woken = consume(b, b.consumers, "t", { timeoutMs: 5_000 }, (ms) => ms);
  assertEquals(b.findTopic("t"), undefined, "waiting for a topic creates none");
  assertEquals(b.consumers.waitingFor("t"), 1, "a consumer may wait for a new topic");
  await b.publish("t", bytes("hello"));
  assertEquals(texts(await woken), ["hello"]);
  const empty = consume(b, b.consumers, "t", { timeoutMs: 5_000 }, (ms) => ms.length);
  t.advance(4_999);
  assertEquals(b.consumers.count(b.findTopic("t")!), 1);
  t.advance(1);
  assertEquals(await empty, 0);
  await t.close();
});

Deno.test("consume() with a filter finds a match inside the scan window, not past it", async () => {
  const t = await openBroker();
  const b = t.broker;
  const filter = { filterKey: "k", filterVal: "yes" };
  await b.publishBatch("w", [
    ...Array.from({ length: FILTER_SCAN_WINDOW - 1 }, () => ({ payload: bytes('{"k":"no"}') })),
    { payload: bytes('{"k":"yes","n":1}') },
    { payload: bytes('{"k":"no"}') },
    { payload: bytes('{"k":"yes","n":2}') },
  ]);
  const g = b.findTopic("w")!.defaultGroup;
  assertEquals(texts(await consume(b, b.consumers, "w", filter, (ms) => ms)), [
    '{"k":"yes","n":1}',
  ]);
  assertEquals(g.examined, FILTER_SCAN_WINDOW);
  const past = await consume(b, b.consumers, "w", filter, (ms) => ms);
  assertEquals(past, [], "the second match lies past the window");
  assertEquals(g.examined, 2 * FILTER_SCAN_WINDOW);
  await consume(b, b.consumers, "w", { limit: 2 }, (ms) => ms); // two from the head go
  assertEquals(texts(await consume(b, b.consumers, "w", filter, (ms) => ms)), [
    '{"k":"yes","n":2}',
  ]);
  await t.close();
});

Deno.test("consume() parked with a filter looks at each new message only, and takes a match", async () => {
  const t = await openBroker();
  const b = t.broker;
  const other = Array.from(
    { length: 100 },
    (_, i) => ({ payload: bytes(`{"k":"other","i":${i}}`) }),
  );
  for (let i = 0; i < 20; i++) await b.publishBatch("f", other); // 2,000 that never match
  const topic = b.findTopic("f")!;
  const g = topic.defaultGroup;
  const opts = { timeoutMs: 30_000, filterKey: "k", filterVal: "mine" };
  const polls = Array.from({ length: 20 }, () => consume(b, b.consumers, "f", opts, texts));
  assertEquals(b.consumers.count(topic), 20);
  assertEquals(g.examined, 20 * FILTER_SCAN_WINDOW, "each looked at one window as it parked");
  for (let i = 0; i < 10; i++) await b.publish("f", bytes('{"k":"other"}'));
  assertEquals(g.examined, 20 * FILTER_SCAN_WINDOW + 10 * 20, "then at each new message once");
  t.advance(1_000); // a sweep with ready messages left looks at nothing again
  assertEquals(g.examined, 20 * FILTER_SCAN_WINDOW + 10 * 20);
  await b.publish("f", bytes('{"k":"mine"}'));
  assertEquals(await polls[0], ['{"k":"mine"}'], "the longest-waiting consumer gets the match");
  assertEquals(b.consumers.count(topic), 19);
  t.advance(29_000); // the polls' deadline, before the match's lease ends
  assertEquals(await Promise.all(polls.slice(1)), polls.slice(1).map(() => []));
  assertEquals(g.readyCount, 2_010, "nothing that did not match was taken");
  await t.close();
});

Deno.test("ack() answers acked and not-found ids, once each; unknown topics find nothing", async () => {
  const t = await openBroker();
  const b = t.broker;
  const { id } = await b.publish("t", bytes("a"));
  await b.consume("t");
  assertEquals(await ack(b, "t", "", [id, "nope", id]), { acked: [id], notFound: ["nope"] });
  assertEquals(await ack(b, "t", "", [id]), { acked: [], notFound: [id] }, "acked already");
  assertEquals(await ack(b, "t", "billing", ["x", "x"]), { acked: [], notFound: ["x"] });
  assertEquals(await ack(b, "gone", "", ["x"]), { acked: [], notFound: ["x"] });
  const topic = b.findTopic("t")!;
  assertEquals([topic.counters.acked, topic.messages.size], [1, 0]);
  const { acked, notFound } = ackIn(topic, topic.defaultGroup, ["y"], T0);
  assertEquals([acked, notFound, topic.counters.acked], [[], ["y"], 1]);
  await t.close();
});

Deno.test("requeue() counts an attempt, may delay, and the last attempt dead-letters", async () => {
  const t = await openBroker();
  const b = t.broker;
  const { id } = await b.publish("jobs", bytes("x"));
  await assertRejects(() => requeue(b, "jobs", "", id), "message_not_found");
  await b.consume("jobs");
  assertEquals(await requeue(b, "jobs", "", id, { reason: "busy", delayMs: 1_000 }), {
    retryCount: 1,
    deadLettered: false,
    topic: "jobs",
  });
  assertEquals(await b.consume("jobs"), [], "delayed");
  t.advance(1_000);
  const [m] = await b.consume("jobs");
  assertEquals([m?.retryCount, m?.reason], [1, "busy"]);
  for (let attempt = 2; attempt < MAX_ATTEMPTS; attempt++) {
    assertEquals((await requeue(b, "jobs", "", id)).retryCount, attempt);
    await b.consume("jobs");
  }
  assertEquals(await requeue(b, "jobs", "", id, { reason: "poison" }), {
    retryCount: MAX_ATTEMPTS,
    deadLettered: true,
    topic: "jobs.dlq",
  });
  assertEquals(b.findTopic("jobs")!.messages.size, 0);
  const [dead] = await b.consume("jobs.dlq", { peek: true });
  assertEquals([dead?.msg.id, dead?.retryCount, dead?.reason], [id, MAX_ATTEMPTS, "poison"]);
  assertEquals(b.findTopic("jobs")!.counters.requeued, MAX_ATTEMPTS);
  await t.close();
});

Deno.test("touch() extends a lease from now: the old end no longer ends it", async () => {
  const t = await openBroker();
  const b = t.broker;
  const { id } = await b.publish("t", bytes("x"));
  assertThrows(() => touch(b, "t", "", id, 1_000), "message_not_found");
  await b.consume("t", { visibilityMs: 1_000 });
  t.set(T0 + 800);
  assertEquals(touch(b, "t", "", id, 1_000), T0 + 1_800);
  t.advance(200); // T0 + 1_000: the first lease's end
  const g = b.findTopic("t")!.defaultGroup;
  assertEquals([g.inFlightCount, g.readyCount], [1, 0]);
  t.advance(799);
  assertEquals(g.inFlightCount, 1);
  t.advance(1);
  assertEquals([g.inFlightCount, g.readyCount], [0, 1]);
  assertEquals((await b.consume("t"))[0]?.retryCount, 1);
  await t.close();
});

Deno.test("leased() lists a group's in-flight messages, soonest lease end first, up to a limit", async () => {
  const t = await openBroker();
  const b = t.broker;
  assertEquals(leased(b, "t", "", 10), [], "no such topic: nothing");
  const ids: string[] = [];
  for (const p of ["a", "b", "c"]) ids.push((await b.publish("t", bytes(p))).id);
  await b.consume("t", { visibilityMs: 5_000 }); // a until T0 + 5s
  await b.consume("t", { visibilityMs: 2_000, limit: 2 }); // b, c until T0 + 2s
  touch(b, "t", "", ids[2]!, 9_000); // c until T0 + 9s; its old heap entry is stale
  const list = leased(b, "t", "", 10);
  assertEquals(list.map((l) => [text(l.msg.readPayload()), l.leaseEndsAt, l.group]), [
    ["b", T0 + 2_000, ""],
    ["a", T0 + 5_000, ""],
    ["c", T0 + 9_000, ""],
  ]);
  assertEquals(leased(b, "t", "", 1).map((l) => l.msg.id), [ids[1]!]);
  await b.ack("t", "", [ids[1]!]);
  assertEquals(leased(b, "t", "", 10).map((l) => l.msg.id), [ids[0]!, ids[2]!]);
  assertEquals(leased(b, "t", "other", 10), [], "no such group: nothing");
  await t.close();
});

Deno.test("release() readies an in-flight message now, keeping its retry count and reason", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ferry-twin-" });
  const t = await openBroker({ dataDir: dir });
  const b = t.broker;
  const { id } = await b.publish("t", bytes("x"));
  await b.consume("t");
  await b.requeue("t", "", id, { reason: "flaky" });
  await b.consume("t", { visibilityMs: 60_000 });
  await assertRejects(() => release(b, "t", "", "nope"), "message_not_found");
  assertEquals(await release(b, "t", "", id), {
    retryCount: 1,
    deadLettered: false,
    topic: "t",
  });
  const [again] = await b.consume("t");
  assertEquals([again?.msg.id, again?.retryCount, again?.reason], [id, 1, "flaky"]);
  await t.close();
  // Its record replays: after a restart the message is there with the same count.
  const t2 = await openBroker({ dataDir: dir });
  const [replayed] = await t2.broker.consume("t");
  assertEquals([replayed?.msg.id, replayed?.retryCount], [id, 1]);
  await t2.close();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("leaseEnded() readies the message with one more attempt, or dead-letters the last", async () => {
  const t = await openBroker();
  const b = t.broker;
  const { id } = await b.publish("t", bytes("x"));
  const topic = b.findTopic("t")!;
  const g = topic.defaultGroup;
  const [d] = take(topic, g, lease(1), T0);
  leaseEnded(b, topic, g, d!, T0 + 1_000);
  const again = topic.delivery(g, id)!;
  assertEquals([again.retryCount, again.reason, g.readyCount], [1, "visibility timeout", 1]);
  for (let attempt = 1; attempt < MAX_ATTEMPTS; attempt++) {
    const [next] = take(topic, g, lease(1), T0 + attempt * 1_000);
    assertEquals(next?.retryCount, attempt);
    leaseEnded(b, topic, g, next!, T0 + (attempt + 1) * 1_000);
  }
  assertEquals(topic.messages.size, 0);
  const dead = b.findTopic("t.dlq")!.messages.get(id)!;
  assertEquals([dead.reason, topic.counters.deadLettered, topic.counters.requeued], [
    "visibility timeout",
    1,
    MAX_ATTEMPTS,
  ]);
  await t.close();
});

Deno.test("leaseEnded() drops a message whose TTL passed during the lease, counting it expired", async () => {
  const t = await openBroker();
  const b = t.broker;
  await b.publish("t", bytes("x"), { ttlMs: 500 });
  const topic = b.findTopic("t")!;
  const [d] = take(topic, topic.defaultGroup, lease(1), T0);
  t.set(T0 + 500);
  assert(topic.expireIfDue(d!.msg, t.now), "due");
  assertEquals(topic.messages.size, 1, "an in-flight copy keeps its lease");
  leaseEnded(b, topic, topic.defaultGroup, d!, T0 + 1_000);
  assertEquals([topic.messages.size, topic.counters.expired, topic.counters.requeued], [0, 1, 0]);
  assertEquals(b.findTopic("t.dlq"), undefined);
  await t.close();
});

Deno.test("peek() shows up to MAX_PEEK of the default group in order, leasing nothing", async () => {
  const t = await openBroker();
  const b = t.broker;
  for (let i = 0; i < MAX_PEEK + 2; i++) await b.publish("t", bytes(`m${i}`));
  assertEquals(peek(b, "t", 100).length, MAX_PEEK);
  assertEquals(texts(peek(b, "t", 2)), ["m0", "m1"]);
  assertEquals(peek(b, "missing"), []);
  assertEquals(b.findTopic("t")!.defaultGroup.readyCount, MAX_PEEK + 2);
  await t.close();
});
