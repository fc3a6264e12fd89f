import { assertEquals } from "../_support/assert.ts";
import { RATE_INTERVAL_MS, RATE_SAMPLES } from "../../lib/rates.ts";
import { bytes, openBroker, T0 } from "./_broker.ts";

Deno.test("Rates: a topic's and the totals' events per second over each interval", async () => {
  const t = await openBroker();
  const b = t.broker;
  await b.publish("a", bytes("x"));
  t.advance(0); // the first sample, at T0
  assertEquals(b.rates.totals(), [], "one sample gives no rate yet");
  for (let i = 0; i < 10; i++) await b.publish("a", bytes("x"));
  await b.consume("a", { limit: 5, autoAck: true });
  t.advance(RATE_INTERVAL_MS - 1);
  assertEquals(b.rates.totals(), [], "no sample before the interval is over");
  t.advance(1);
  const at = T0 + RATE_INTERVAL_MS;
  const a = b.findTopic("a")!;
  assertEquals(b.rates.of(a), [
    { at, published: 2, delivered: 1, acked: 1, requeued: 0, deadLettered: 0, expired: 0 },
  ]);
  assertEquals(b.rates.latest(a)?.published, 2);
  await b.publish("b", bytes("y"));
  t.advance(RATE_INTERVAL_MS);
  assertEquals(b.rates.totals().map((p) => p.published), [2, 0.2]);
  assertEquals(b.rates.of(b.findTopic("b")!), [], "b has one sample so far");
  await t.close();
});

Deno.test("Rates keeps five minutes, and a deleted topic's history goes with it", async () => {
  const t = await openBroker();
  const b = t.broker;
  await b.publish("a", bytes("x"));
  for (let i = 0; i < RATE_SAMPLES + 10; i++) t.advance(RATE_INTERVAL_MS);
  assertEquals(b.rates.totals().length, RATE_SAMPLES - 1);
  const first = b.rates.totals()[0]!.at;
  assertEquals(b.rates.totals().at(-1)!.at - first, (RATE_SAMPLES - 2) * RATE_INTERVAL_MS);
  const old = b.findTopic("a")!;
  await b.deleteTopic("a");
  t.advance(RATE_INTERVAL_MS);
  assertEquals(b.rates.of(old), [], "forgotten at the next sample");
  await b.publish("a", bytes("again"));
  t.advance(RATE_INTERVAL_MS);
  assertEquals(b.rates.of(b.findTopic("a")!), [], "the new topic starts a new history");
  assertEquals(b.rates.totals().at(-1)!.published, 0.2, "the totals count across it");
  await t.close();
});
