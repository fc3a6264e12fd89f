import { assert, assertEquals } from "../../_support/assert.ts";
import { type Consumer, Consumers } from "../../../lib/delivery/consumers.ts";
import { take } from "../../../lib/delivery/deliveries.ts";
import type { Group } from "../../../lib/delivery/group.ts";
import { PayloadFilter, StoredMessage } from "../../../lib/message.ts";
import type { Topic } from "../../../lib/topic.ts";
import { RecordType } from "../../../lib/storage/record.ts";
import { bytes, memTopic, put, T0, text } from "../_broker.ts";

/**
 * A consumer that records what it is offered and whether it was closed. It keeps its own credits
 * as a push consumer does: a leased delivery spends one, `give()` hands one back.
 */
function consumer(
  group: Group,
  opts: Partial<Pick<Consumer, "credits" | "once" | "peek" | "filter" | "deadline">> = {},
) {
  const offers: { ids: string[]; ephemeral: boolean }[] = [];
  let closed = 0;
  let credits = opts.credits ?? 1;
  const peek = opts.peek ?? false;
  const c: Consumer = {
    group,
    filter: opts.filter,
    visibilityMs: 1_000,
    peek,
    get credits() {
      return credits;
    },
    deadline: opts.deadline ?? Infinity,
    once: opts.once ?? false,
    offer: (items, ephemeral) => {
      if (offers.length > 100) throw new Error("offered again and again");
      offers.push({ ids: items.map((d) => d.msg.id), ephemeral });
      if (!ephemeral && !peek) credits -= items.length;
    },
    close: () => closed++,
  };
  return {
    c,
    offers,
    /** Gives back `n` credits (an ack). */
    give(n = 1) {
      credits += n;
    },
    /** Every id offered, in order. */
    get ids() {
      return offers.flatMap((o) => o.ids);
    },
    get closed() {
      return closed;
    },
  };
}

async function group(topic: Topic, name: string): Promise<Group> {
  await topic.commit({ type: RecordType.Group, seq: topic.nextSeq(), name, createdAt: T0 }, T0);
  return topic.groups.get(name)!;
}

Deno.test("Consumers.add() serves a consumer at once, leasing; its remover closes nothing", async () => {
  const topic = memTopic();
  await put(topic, "m1", "a");
  await put(topic, "m2", "b");
  const consumers = new Consumers(take);
  const a = consumer(topic.defaultGroup, { credits: 5 });
  const remove = consumers.add(topic, a.c, T0);
  assertEquals(a.offers, [{ ids: ["m1", "m2"], ephemeral: false }]);
  assertEquals(a.c.credits, 3);
  assertEquals([topic.defaultGroup.readyCount, topic.defaultGroup.inFlightCount], [0, 2]);
  assertEquals(topic.delivery(topic.defaultGroup, "m1")?.at, T0 + 1_000, "leased for its lease");
  assertEquals(consumers.waitingOn(topic.defaultGroup), true, "a multi-credit consumer stays");
  remove();
  await put(topic, "m3", "c");
  consumers.deliver(topic, topic.defaultGroup, T0);
  assertEquals([a.offers.length, a.closed, consumers.count(topic)], [1, 0, 0]);
  assertEquals(topic.defaultGroup.readyCount, 1);
});

Deno.test("Consumers.deliver() serves waiting consumers in arrival order by their credits", async () => {
  const topic = memTopic();
  const g = topic.defaultGroup;
  const consumers = new Consumers(take);
  const a = consumer(g, { credits: 1 });
  const b = consumer(g, { credits: 2 });
  consumers.add(topic, a.c, T0);
  consumers.add(topic, b.c, T0);
  for (const id of ["m1", "m2", "m3", "m4"]) await put(topic, id, id);
  consumers.deliver(topic, g, T0);
  assertEquals(a.ids, ["m1"]);
  assertEquals(b.ids, ["m2", "m3"]);
  assertEquals([a.c.credits, b.c.credits, g.readyCount], [0, 0, 1], "m4 waits for a credit");
  // A credit given back (an ack) serves the consumer that has it at the next deliver().
  b.give();
  consumers.deliver(topic, g, T0);
  assertEquals(b.ids, ["m2", "m3", "m4"]);
  assertEquals(a.ids, ["m1"]);
  assertEquals(consumers.count(topic), 2);
});

Deno.test("Consumers.deliver() lets a one-shot consumer go after its first offer", async () => {
  const topic = memTopic();
  const g = topic.defaultGroup;
  const consumers = new Consumers(take);
  const once = consumer(g, { credits: 5, once: true });
  const stays = consumer(g, { credits: 5 });
  consumers.add(topic, once.c, T0);
  consumers.add(topic, stays.c, T0);
  await put(topic, "m1", "a");
  consumers.deliver(topic, g, T0);
  await put(topic, "m2", "b");
  consumers.deliver(topic, g, T0);
  assertEquals(once.offers, [{ ids: ["m1"], ephemeral: false }]);
  assertEquals(stays.ids, ["m2"]);
  assertEquals(stays.c.credits, 4);
  assertEquals([consumers.count(topic), once.closed], [1, 0], "served, so never closed");
});

Deno.test("Consumers.deliver() hands a filtered consumer only what its filter takes", async () => {
  const topic = memTopic();
  const g = topic.defaultGroup;
  const consumers = new Consumers(take);
  const eu = consumer(g, { credits: 5, filter: new PayloadFilter("region", "eu") });
  const any = consumer(g, { credits: 5 });
  consumers.add(topic, eu.c, T0);
  await put(topic, "m1", '{"region":"us"}');
  await put(topic, "m2", '{"region":"eu"}');
  consumers.deliver(topic, g, T0);
  assertEquals(eu.ids, ["m2"]);
  assertEquals(g.readyCount, 1, "nobody else waits: us stays ready");
  consumers.add(topic, any.c, T0);
  assertEquals(any.ids, ["m1"]);
});

Deno.test("Consumers.broadcast() offers to the consumers waiting now and spends no credit", async () => {
  const topic = memTopic();
  const billing = await group(topic, "billing");
  const consumers = new Consumers(take);
  const once = consumer(topic.defaultGroup, { once: true, deadline: T0 + 1_000 });
  const push = consumer(billing, { credits: 2 });
  const picky = consumer(billing, { credits: 2, filter: new PayloadFilter("k", undefined) });
  for (const x of [once, push, picky]) consumers.add(topic, x.c, T0);
  const msg = new StoredMessage({
    id: "b1",
    seq: 0,
    timestamp: T0,
    payload: bytes("hello"),
    priority: 1,
    expiresAt: 0,
    headers: undefined,
    idemKey: undefined,
    redriveCount: 0,
    origin: undefined,
    reason: undefined,
  }, 0);
  assertEquals(consumers.broadcast(topic.name, topic, msg), 2);
  assertEquals(once.offers, [{ ids: ["b1"], ephemeral: true }]);
  assertEquals(push.offers, [{ ids: ["b1"], ephemeral: true }]);
  assertEquals(picky.offers, []);
  assertEquals([push.c.credits, picky.c.credits], [2, 2]);
  assertEquals(consumers.count(topic), 2, "the one-shot consumer left; the others stay");
  assertEquals(topic.messages.size, 0, "nothing is stored or leased");
  // A consumer that comes later never sees it.
  const late = consumer(topic.defaultGroup);
  consumers.add(topic, late.c, T0);
  assertEquals(late.offers, []);
});

Deno.test("Consumers.expire() closes waits at their deadline, not before, and only once", async () => {
  const topic = memTopic();
  const g = topic.defaultGroup;
  const consumers = new Consumers(take);
  const served = consumer(g, { once: true, deadline: T0 + 50 });
  const parked = consumer(g, { once: true, deadline: T0 + 100 });
  const forever = consumer(g);
  consumers.add(topic, served.c, T0);
  consumers.add(topic, parked.c, T0);
  consumers.add(topic, forever.c, T0);
  await put(topic, "m1", "a");
  consumers.deliver(topic, g, T0); // "served" came first: it takes m1 and leaves
  assertEquals(served.ids, ["m1"]);
  consumers.expire(T0 + 99);
  assertEquals([served.closed, parked.closed], [0, 0], "a served wait is not closed");
  consumers.expire(T0 + 100);
  assertEquals([served.closed, parked.closed, forever.closed], [0, 1, 0]);
  consumers.expire(T0 + 1_000_000);
  assertEquals(parked.closed, 1);
  assertEquals(parked.offers, []);
  assertEquals(consumers.count(topic), 1);
});

Deno.test("Consumers.release() closes every consumer of a topic's groups (drain, deletion)", async () => {
  const topic = memTopic("a");
  const other = memTopic("b");
  const billing = await group(topic, "billing");
  const consumers = new Consumers(take);
  const x = consumer(topic.defaultGroup, { once: true, deadline: T0 + 100 });
  const y = consumer(billing, { credits: 3 });
  const z = consumer(other.defaultGroup);
  consumers.add(topic, x.c, T0);
  consumers.add(topic, y.c, T0);
  consumers.add(other, z.c, T0);
  consumers.release(topic);
  assertEquals([x.closed, y.closed, z.closed], [1, 1, 0]);
  assertEquals([consumers.count(topic), consumers.count(other)], [0, 1]);
  consumers.expire(T0 + 100);
  assertEquals(x.closed, 1, "a released wait is not closed again at its deadline");
  await put(topic, "m1", "a");
  consumers.deliverAll(topic, T0);
  assertEquals([x.offers, y.offers], [[], []]);
});

Deno.test("Consumers.wait() answers with a delivery, at its deadline with nothing, or on abort", async () => {
  const topic = memTopic();
  const g = topic.defaultGroup;
  const consumers = new Consumers(take);
  const spec = { filter: undefined, visibilityMs: 1_000, peek: false, limit: 10 };

  const served = consumers.wait(topic, g, spec, T0 + 5_000, T0, undefined);
  await put(topic, "m1", "a");
  await put(topic, "m2", "b");
  consumers.deliver(topic, g, T0 + 1);
  const got = await served;
  assertEquals([got.items.map((d) => text(d.msg.readPayload())), got.ephemeral], [
    ["a", "b"],
    false,
  ]);
  assertEquals(g.inFlightCount, 2);

  const timedOut = consumers.wait(topic, g, spec, T0 + 5_000, T0, undefined);
  consumers.expire(T0 + 5_000);
  assertEquals(await timedOut, { items: [], ephemeral: false });

  const abort = new AbortController();
  const left = consumers.wait(topic, g, spec, T0 + 5_000, T0, abort.signal);
  assertEquals(consumers.waitingOn(g), true);
  abort.abort();
  assertEquals(await left, { items: [], ephemeral: false });
  assertEquals(consumers.waitingOn(g), false, "an aborted wait leaves the queue");
  await put(topic, "m3", "c");
  consumers.deliver(topic, g, T0 + 2);
  assertEquals(g.readyCount, 1, "nothing is leased to a client that went away");
});

Deno.test("Consumers.wait() answers at once with what is ready, ignoring a later abort", async () => {
  const topic = memTopic();
  const consumers = new Consumers(take);
  await put(topic, "m1", "a");
  const abort = new AbortController();
  const spec = { filter: undefined, visibilityMs: 1_000, peek: true, limit: 1 };
  const got = await consumers.wait(topic, topic.defaultGroup, spec, T0 + 1, T0, abort.signal);
  abort.abort();
  assertEquals(got.items.map((d) => d.msg.id), ["m1"]);
  assertEquals(topic.defaultGroup.readyCount, 1, "a peek leases nothing");
  assert(!consumers.waitingOn(topic.defaultGroup));
});

Deno.test({
  // Regression (found by this twin): deliver() does not take credits from a peeking consumer, and a consumer that is not
  // one-shot stays in the list, so its loop re-offers the same ready messages forever (the
  // recording consumer throws after 100 offers to end the test). No caller builds such a
  // consumer yet; a peeking push consumer (a WebSocket spy) would hang the event loop.
  name: "Consumers.deliver() offers a multi-credit peeking consumer what is ready once per call",
  fn: async () => {
    const topic = memTopic();
    const consumers = new Consumers(take);
    await put(topic, "m1", "a");
    const spy = consumer(topic.defaultGroup, { credits: 5, peek: true });
    consumers.add(topic, spy.c, T0);
    assertEquals(spy.offers, [{ ids: ["m1"], ephemeral: false }]);
  },
});

Deno.test({
  // Regression (found by this twin): wait() adds an "abort" listener to a signal that has already aborted, which never
  // fires: the consumer stays parked until its deadline and takes (leases) the next message
  // for a client that has gone, where an AbortSignal API answers at once.
  name: "Consumers.wait() with a signal already aborted leaves at once and leases nothing",
  fn: async () => {
    const topic = memTopic();
    const consumers = new Consumers(take);
    const spec = { filter: undefined, visibilityMs: 1_000, peek: false, limit: 1 };
    const waiting = consumers.wait(
      topic,
      topic.defaultGroup,
      spec,
      T0 + 30_000,
      T0,
      AbortSignal.abort(),
    );
    assertEquals(consumers.waitingOn(topic.defaultGroup), false);
    await put(topic, "m1", "a");
    consumers.deliver(topic, topic.defaultGroup, T0);
    assertEquals(topic.defaultGroup.readyCount, 1);
    consumers.expire(T0 + 30_000);
    assertEquals(await waiting, { items: [], ephemeral: false });
  },
});
