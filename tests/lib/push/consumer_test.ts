import { assertEquals } from "../../_support/assert.ts";
import { Consumers, type Offered } from "../../../lib/delivery/consumers.ts";
import { take } from "../../../lib/delivery/deliveries.ts";
import { PushConsumer } from "../../../lib/push/consumer.ts";
import type { Topic } from "../../../lib/topic.ts";
import { memTopic, put, T0 } from "../_broker.ts";

/** A push consumer over the real pipeline that records what it sends; `full` refuses sends. */
class Recorder extends PushConsumer {
  sent: string[] = [];
  full = false;
  closes = 0;
  constructor(topic: Topic, consumers: Consumers, public max: number, public now = T0) {
    super(consumers, topic, topic.defaultGroup, 1_000, () => this.now);
  }
  protected get limit(): number {
    return this.max;
  }
  protected send(item: Offered): boolean {
    if (this.full) return false;
    this.sent.push(item.msg.id);
    return true;
  }
  protected override closed(): void {
    this.closes++;
  }
}

async function topicWith(ids: string[]): Promise<Topic> {
  const topic = memTopic();
  for (const id of ids) await put(topic, id, id);
  return topic;
}

Deno.test("PushConsumer takes up to its limit; a settle gives a credit back at the next serve", async () => {
  const topic = await topicWith(["m1", "m2", "m3"]);
  const p = new Recorder(topic, new Consumers(take), 2);
  p.start(T0);
  assertEquals([p.sent, p.credits, p.held], [["m1", "m2"], 0, 2]);
  p.settle("m1");
  assertEquals(p.credits, 1);
  p.serve(T0);
  assertEquals(p.sent, ["m1", "m2", "m3"]);
});

Deno.test("PushConsumer gets a credit back when a lease it holds ends unsettled", async () => {
  const topic = await topicWith(["m1"]);
  const p = new Recorder(topic, new Consumers(take), 1);
  p.start(T0);
  assertEquals(p.credits, 0);
  p.now = T0 + 999;
  assertEquals(p.credits, 0, "the lease holds until its end");
  p.now = T0 + 1_000;
  assertEquals([p.credits, p.held], [1, 0], "a client that drops deliveries never starves");
});

Deno.test("PushConsumer stops an offer at the first send its transport refuses", async () => {
  const topic = await topicWith(["m1", "m2"]);
  const p = new Recorder(topic, new Consumers(take), 5);
  p.full = true;
  p.start(T0);
  assertEquals(p.sent, []);
  assertEquals(p.held, 2, "both were leased to it: their leases end as usual");
  assertEquals([topic.defaultGroup.readyCount, topic.defaultGroup.inFlightCount], [0, 2]);
});

Deno.test("PushConsumer: a lower limit parks it; stop() leaves the pipeline, close() is told", async () => {
  const topic = await topicWith(["m1", "m2"]);
  const consumers = new Consumers(take);
  const p = new Recorder(topic, consumers, 0);
  p.start(T0);
  assertEquals([p.sent, p.started], [[], true]);
  p.max = 1;
  p.serve(T0);
  assertEquals(p.sent, ["m1"]);
  p.stop();
  p.max = 5;
  p.serve(T0);
  assertEquals([p.sent, p.started, consumers.count(topic)], [["m1"], false, 0]);
  const q = new Recorder(topic, consumers, 0);
  q.start(T0);
  consumers.release(topic);
  assertEquals([q.closes, q.started], [1, false]);
});
