/**
 * The client's messaging calls against a real broker: publish (text, bytes, JSON, headers,
 * options, keys, broadcast), consume with each option, ack, batch ack, requeue and touch. What
 * the client sends is read off the wire through its `fetch` option.
 */

import { assert, assertEquals, assertMatch } from "../../_support/assert.ts";
import { settle, UUID_V7 } from "../../_support/http.ts";
import { eventually } from "../../_support/wait.ts";
import { withBroker } from "../../_support/server.ts";
import {
  Ferry,
  FerryError,
  payloadBytes,
  payloadJson,
  payloadText,
} from "../../../clients/ts/mod.ts";

/** A fetch that records each request's method, URL, headers and body text before sending it. */
function recording() {
  const sent: { method: string; url: URL; headers: Headers; body: string }[] = [];
  const fetchFn: typeof fetch = async (input, init) => {
    const req = new Request(input, init);
    sent.push({
      method: req.method,
      url: new URL(req.url),
      headers: req.headers,
      body: await req.clone().text(),
    });
    return fetch(req);
  };
  return { sent, fetch: fetchFn };
}

Deno.test("Ferry.publish() then consume() and ack(): the wire's answers, and a message gone once acked", async () => {
  await withBroker({}, async (ctx) => {
    const ferry = new Ferry({ url: ctx.url });
    const p = await ferry.publish("orders", "hello", {
      priority: "high",
      ttl: "1h",
      headers: { trace: "t-1", "X-MQ-Tenant": "acme" },
    });
    assertMatch(p.id, UUID_V7);
    assertEquals([p.topic, p.priority, p.deduplicated], ["orders", "high", false]);
    assert(p.expires_at, "a ttl gives expires_at");
    const [m, ...rest] = await ferry.consume("orders");
    assertEquals(rest, []);
    assertEquals([m!.id, m!.payload_text, m!.retry_count], [p.id, "hello", 0]);
    assertEquals(m!.headers, { "x-mq-trace": "t-1", "x-mq-tenant": "acme" });
    assertEquals(await ferry.ack("orders", m!.id), undefined);
    assertEquals(await ferry.consume("orders"), [], "an empty topic is [] (404 queue_empty)");
  });
});

Deno.test("Ferry.publish() sends bytes, JSON and text with their content types; payload helpers read them", async () => {
  await withBroker({}, async (ctx) => {
    const rec = recording();
    const ferry = new Ferry({ url: ctx.url, fetch: rec.fetch });
    const bytes = new Uint8Array([0, 159, 146, 150, 255]);
    await ferry.publish("mixed", bytes);
    await ferry.publish("mixed", { sku: "a1", qty: 2 });
    await ferry.publish("mixed", "plain");
    await ferry.publish("mixed", "<x/>", { contentType: "application/xml" });
    assertEquals(rec.sent.map((r) => r.headers.get("content-type")), [
      "application/octet-stream",
      "application/json",
      "text/plain;charset=utf-8",
      "application/xml",
    ]);
    const [b, j, t] = await ferry.consume("mixed", { limit: 3 });
    assertEquals(payloadBytes(b!), bytes);
    assertEquals(b!.payload_text, undefined, "not UTF-8: no payload_text");
    assertEquals(payloadJson(j!), { sku: "a1", qty: 2 });
    assertEquals(payloadText(t!), "plain");
  });
});

Deno.test("Ferry.publish() with an idempotency key: a repeat is deduplicated; 'auto' keys differ per call", async () => {
  await withBroker({}, async (ctx) => {
    const rec = recording();
    const ferry = new Ferry({ url: ctx.url, fetch: rec.fetch });
    const a = await ferry.publish("keys", "x", { idempotencyKey: "order-17" });
    const b = await ferry.publish("keys", "x", { idempotencyKey: "order-17" });
    assertEquals([b.id, b.deduplicated], [a.id, true]);
    const c = await ferry.publish("keys", "y", { idempotencyKey: "auto" });
    const d = await ferry.publish("keys", "y", { idempotencyKey: "auto" });
    assert(!c.deduplicated && !d.deduplicated && c.id !== d.id, "two auto keys, two messages");
    const autoKeys = rec.sent.slice(2).map((r) => r.headers.get("idempotency-key") ?? "");
    assert(autoKeys.every((k) => /^[0-9a-f-]{36}$/.test(k)) && autoKeys[0] !== autoKeys[1]);
    const e = await ferry.publish("keys", "same bytes", { payloadKey: true });
    const f = await ferry.publish("keys", "same bytes", { payloadKey: true });
    assertEquals([f.id, f.deduplicated], [e.id, true], "payloadKey dedupes on the content");
    assertEquals(rec.sent.at(-1)!.url.searchParams.get("idempotency"), "auto");

    const everyPublish = new Ferry({ url: ctx.url, idempotencyKey: "auto", fetch: rec.fetch });
    await everyPublish.publish("keys", "z");
    assertMatch(rec.sent.at(-1)!.headers.get("idempotency-key") ?? "", /^[0-9a-f-]{36}$/);
  });
});

Deno.test("Ferry.publish() with durations in ms or text, a delay, and a broadcast to a waiting consumer", async () => {
  await withBroker({}, async (ctx) => {
    const rec = recording();
    const ferry = new Ferry({ url: ctx.url, fetch: rec.fetch });
    const later = await ferry.publish("d", "later", { delay: 90_000, ttl: "2h" });
    assert(later.visible_at, "a delay gives visible_at");
    assertEquals(rec.sent[0]!.url.searchParams.get("delay"), "90s");
    assertEquals(rec.sent[0]!.url.searchParams.get("ttl"), "2h");
    assertEquals(await ferry.consume("d"), [], "hidden during its delay");
    await ctx.tick(90_000);
    assertEquals((await ferry.consume("d")).map((m) => m.payload_text), ["later"]);

    const waiting = ferry.consume("b", { timeout: "5s" });
    let sent;
    for (let i = 0; i < 100; i++) {
      sent = await ferry.publish("b", "flash", { broadcast: true });
      if (sent.delivered_to === 1) break;
    }
    assertEquals(sent, { broadcast: true, delivered_to: 1 });
    assertEquals((await waiting).map((m) => m.payload_text), ["flash"]);
  });
});

Deno.test("Ferry.publishBatch() sends text, bytes and per-message options in one request", async () => {
  await withBroker({}, async (ctx) => {
    const rec = recording();
    const ferry = new Ferry({ url: ctx.url, fetch: rec.fetch });
    const bytes = new Uint8Array([0, 1, 254, 255]);
    const answers = await ferry.publishBatch("batch", [
      "plain",
      bytes,
      { payload: "opts", priority: "high", ttl: 60_000, headers: { trace: "t-1" } },
      { payload: "later", delay: "5s", idempotencyKey: "k-1", contentType: "text/plain" },
    ]);
    assertEquals(rec.sent.length, 1, "one request");
    assertEquals(rec.sent[0]!.url.pathname, "/publish/batch/batch");
    assertEquals(JSON.parse(rec.sent[0]!.body)[2], {
      payload_text: "opts",
      ttl: "1m",
      priority: "high",
      headers: { "X-MQ-trace": "t-1" },
    });
    assertEquals(answers.length, 4);
    for (const a of answers) assertMatch(a.id, UUID_V7);
    assertEquals([answers[2]!.priority, typeof answers[2]!.expires_at], ["high", "string"]);
    assert(answers[3]!.visible_at, "a delay gives visible_at");
    const got = await ferry.consume("batch", { limit: 10 });
    assertEquals(got.map((m) => m.id), [answers[2]!.id, answers[0]!.id, answers[1]!.id]);
    assertEquals(payloadBytes(got[2]!), bytes);
    assertEquals([payloadText(got[1]!), got[0]!.headers], ["plain", { "x-mq-trace": "t-1" }]);

    const again = await ferry.publishBatch("batch", [{ payload: "x", idempotencyKey: "k-1" }]);
    assertEquals([again[0]!.id, again[0]!.deduplicated], [answers[3]!.id, true]);
    assertEquals(await ferry.publishBatch("batch", []), [], "nothing to send, no request");
    assertEquals(rec.sent.length, 3);
  });
});

Deno.test("Ferry.publishBatch() refused: a FerryError naming the item, nothing stored", async () => {
  await withBroker({}, async (ctx) => {
    const ferry = new Ferry({ url: ctx.url });
    const e = await ferry.publishBatch("batch", ["a", { payload: "b", ttl: "soon" }]).catch((
      e,
    ) => e);
    assert(e instanceof FerryError);
    assertEquals([e.status, e.code], [400, "invalid_duration"]);
    assertMatch(e.detail, /messages\[1\]\.ttl/);
    assertEquals(await ferry.consume("batch"), []);
  });
});

Deno.test("Ferry.consume() passes limit, group, peek, filter, autoAck and visibility", async () => {
  await withBroker({}, async (ctx) => {
    const ferry = new Ferry({ url: ctx.url });
    await ferry.createGroup("c", "billing");
    for (const kind of ["a", "b", "a", "c"]) await ferry.publish("c", { kind });
    const peeked = await ferry.consume("c", { peek: true, limit: 10 });
    assertEquals(peeked.length, 4);
    const as = await ferry.consume("c", { filter: { key: "kind", value: "a" }, limit: 10 });
    assertEquals(as.map((m) => payloadJson(m)), [{ kind: "a" }, { kind: "a" }]);
    const auto = await ferry.consume("c", { limit: 1, autoAck: true });
    assertEquals(auto.map((m) => payloadJson(m)), [{ kind: "b" }]);
    const billing = await ferry.consume("c", { group: "billing", limit: 10, visibility: 1_000 });
    assertEquals(billing.length, 4, "the group has its own copies");
    assertEquals(billing[0]!.group, "billing");
    await ctx.tick(1_000);
    const again = await ferry.consume("c", { group: "billing", limit: 10 });
    assertEquals(again.map((m) => m.retry_count), [1, 1, 1, 1], "a 1 s lease ended");
  });
});

Deno.test("Ferry.ackMany() acks a batch and lists the ids it did not find", async () => {
  await withBroker({}, async (ctx) => {
    const ferry = new Ferry({ url: ctx.url });
    for (let i = 0; i < 5; i++) await ferry.publish("batch", `m${i}`);
    const got = await ferry.consume("batch", { limit: 5 });
    const ids = got.map((m) => m.id);
    const r = await ferry.ackMany("batch", [...ids, "nope"]);
    assertEquals(r, { acked: 5, not_found: ["nope"] });
    assertEquals((await ferry.stats()).topics.batch!.in_flight, 0);
  });
});

Deno.test("Ferry.requeue() gives a message back with reason and delay; the third attempt dead-letters it", async () => {
  await withBroker({}, async (ctx) => {
    const ferry = new Ferry({ url: ctx.url });
    await ferry.createGroup("rq", "g");
    await ferry.publish("rq", "job");
    const [m] = await ferry.consume("rq", { group: "g" });
    const r1 = await ferry.requeue(m!, { reason: "db down", delay: "10s" });
    assertEquals([r1.status, r1.retry_count, r1.queue], ["requeued", 1, "rq"]);
    assertEquals(await ferry.consume("rq", { group: "g" }), [], "hidden for its delay");
    await ctx.tick(10_000);
    const [m2] = await ferry.consume("rq", { group: "g" });
    assertEquals([m2!.reason, m2!.retry_count], ["db down", 1]);
    await ferry.requeue(m2!);
    const [m3] = await ferry.consume("rq", { group: "g" });
    const r3 = await ferry.requeue(m3!, { reason: "still down" });
    assertEquals([r3.status, r3.queue], ["dead_lettered", "rq.dlq"]);
    const [dead] = await ferry.peek("rq.dlq");
    assertEquals([dead!.id, dead!.reason], [m!.id, "still down"]);
  });
});

Deno.test("Ferry.touch() extends a lease past its visibility", async () => {
  await withBroker({}, async (ctx) => {
    const ferry = new Ferry({ url: ctx.url });
    await ferry.publish("t", "slow");
    const [m] = await ferry.consume("t", { visibility: "1s" });
    await ctx.tick(800);
    const touched = await ferry.touch("t", m!.id, 1_000);
    assertEquals([touched.id, touched.topic], [m!.id, "t"]);
    assertEquals(Date.parse(touched.visible_at), ctx.clock.now + 1_000);
    await ctx.tick(700); // past the first lease, inside the second
    assertEquals(await ferry.consume("t"), [], "still leased");
    await ferry.ack("t", m!.id);
  });
});

Deno.test("Ferry.ack() of an unknown id is a FerryError with the problem's fields", async () => {
  await withBroker({}, async (ctx) => {
    const ferry = new Ferry({ url: ctx.url });
    await ferry.publish("x", "1");
    const e = await ferry.ack("x", "0190a000-0000-7000-8000-000000000000").catch((e) => e);
    assert(e instanceof FerryError, String(e));
    assertEquals([e.status, e.code], [404, "message_not_found"]);
    assertMatch(e.detail, /Cannot ack message "0190a000-/);
    assert(e.requestId, "the broker's request id");
    assertMatch(e.message, /^POST \/ack\/x\/0190a000-.*: 404 message_not_found: Cannot ack/);
  });
});

Deno.test("Ferry.consume() waiting through a drain rejects with 503 draining, retrying only after Retry-After", async () => {
  await withBroker({}, async (ctx) => {
    const retries: { delayMs: number; code: string | undefined }[] = [];
    const ferry = new Ferry({
      url: ctx.url,
      retries: 2,
      onRetry: (r) => retries.push({ delayMs: r.delayMs, code: r.error.code }),
    });
    const waiting = ferry.consume("drained-lp", { timeout: "30s" }).then(
      (ms) => ms,
      (e: unknown) => e,
    );
    await eventually(
      async () => (await settle(ctx.url, 1), ctx.broker.consumers.waitingFor("drained-lp") === 1),
      10_000,
      "the long-poll waits",
    );
    const t0 = performance.now();
    assertEquals((await ctx.call("POST", "/api/drain")).status, 200);
    const e = await waiting;
    assert(e instanceof FerryError, `not a FerryError: ${JSON.stringify(e)}`);
    assertEquals([e.status, e.code], [503, "draining"]);
    assertMatch(e.message, /the broker is draining \(stopping\)/i);
    assertEquals(retries, [{ delayMs: 1_000, code: "draining" }, {
      delayMs: 1_000,
      code: "draining",
    }]);
    assert(performance.now() - t0 >= 2_000, "each retry waited Retry-After: no spin");
  });
});
