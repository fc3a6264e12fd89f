/**
 * The client's operator calls against a real broker (topics, groups, dead letters, webhooks,
 * health, stats, cluster status, metrics, drain), and a check that some client method reaches
 * every route of the broker's route table.
 */

import { assert, assertEquals, assertMatch } from "../../_support/assert.ts";
import { parseMetrics } from "../../_support/metrics.ts";
import { withBroker } from "../../_support/server.ts";
import { LOOPBACK_ALLOW } from "../../../lib/push/egress.ts";
import { Inbox } from "../../_support/wait.ts";
import { Ferry, FerryError } from "../../../clients/ts/mod.ts";
import { ROUTES } from "../../../routes/app.ts";

Deno.test("Ferry.createTopic() sends retain only for a retention above 0, and 409s a repeat", async () => {
  await withBroker({}, async (ctx) => {
    const bodies: unknown[] = [];
    const ferry = new Ferry({
      url: ctx.url,
      fetch: async (input, init) => {
        if (String(input).endsWith("/api/topics")) bodies.push(JSON.parse(String(init?.body)));
        return await fetch(input, init);
      },
    });
    const plain = await ferry.createTopic("plain");
    assertEquals([plain.name, plain.policy, plain.retain], ["plain", "reject", null]);
    await ferry.createTopic("zero", { retention: 0 });
    await ferry.createTopic("zero-text", { retention: "0s" });
    const kept = await ferry.createTopic("kept", {
      retention: 3_600_000,
      policy: "drop-oldest",
      visibility: "45s",
      maxMessages: 10,
      maxBytes: 4096,
    });
    assertEquals(
      [kept.retain, kept.policy, kept.visibility, kept.max_messages, kept.max_bytes],
      ["1h", "drop-oldest", "45s", 10, 4096],
    );
    assertEquals(bodies.map((b) => "retain" in (b as object)), [false, false, false, true]);
    const e = await ferry.createTopic("kept").catch((e) => e);
    assert(e instanceof FerryError);
    assertEquals([e.status, e.code], [409, "already_exists"]);
  });
});

Deno.test("Ferry.createGroup() and groups(); queues(), peek(), purge() and deleteTopic()", async () => {
  await withBroker({}, async (ctx) => {
    const ferry = new Ferry({ url: ctx.url });
    const g = await ferry.createGroup("orders", "billing");
    assertEquals([g.topic, g.group], ["orders", "billing"]);
    assertEquals((await ferry.groups("orders")).map((x) => x.group), ["billing"]);
    for (let i = 0; i < 12; i++) await ferry.publish("orders", `o${i}`);
    const q = (await ferry.queues()).find((x) => x.name === "orders");
    assertEquals([q?.depth, q?.groups], [12, ["billing"]]);
    assertEquals((await ferry.peek("orders")).length, 10, "peek shows at most 10");
    assertEquals((await ferry.peek("orders", { limit: 2 })).map((m) => m.payload_text), [
      "o0",
      "o1",
    ]);
    assertEquals(await ferry.purge("orders"), { queue: "orders", purged: 12 });
    assertEquals(await ferry.deleteTopic("orders"), { queue: "orders", deleted: true });
    assertEquals((await ferry.queues()).map((x) => x.name), []);
  });
});

Deno.test("Ferry.redrive() moves dead letters back with retry_count 0", async () => {
  await withBroker({}, async (ctx) => {
    const ferry = new Ferry({ url: ctx.url });
    await ferry.publish("jobs", "poison");
    for (let i = 0; i < 3; i++) {
      const [m] = await ferry.consume("jobs");
      await ferry.requeue(m!, { reason: `try ${i}` });
    }
    assertEquals(await ferry.redrive("jobs"), { queue: "jobs", source: "jobs.dlq", moved: 1 });
    const [back] = await ferry.consume("jobs");
    assertEquals([back!.payload_text, back!.retry_count, back!.redrive_count], ["poison", 0, 1]);
  });
});

Deno.test("Ferry.addWebhook(), webhooks(), webhookAttempts() and deleteWebhook() with a real receiver", async () => {
  const got = new Inbox<string>();
  const receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => {
      got.push(await req.text());
      return new Response(null, { status: 204 });
    },
  );
  try {
    await withBroker({ webhookAllow: LOOPBACK_ALLOW }, async (ctx) => {
      const ferry = new Ferry({ url: ctx.url });
      const url = `http://127.0.0.1:${receiver.addr.port}/hook`;
      const w = await ferry.addWebhook("events", url, { secret: "s3cret" });
      assertEquals([w.topic, w.url, w.signed], ["events", url, true]);
      assert(!JSON.stringify(w).includes("s3cret"), "the secret is never echoed");
      await ferry.publish("events", "ping");
      assertEquals(await got.take(1), ["ping"]);
      let attempts = await ferry.webhookAttempts(w.id);
      for (let i = 0; i < 100 && attempts.length === 0; i++) {
        attempts = await ferry.webhookAttempts(w.id); // the attempt is logged after the answer
      }
      assertEquals([attempts[0]?.status, attempts[0]?.outcome], [204, "delivered"]);
      const [listed] = await ferry.webhooks("events");
      assertEquals([listed?.id, listed?.state], [w.id, "active"]);
      assertEquals((await ferry.webhooks()).length, 1, "all topics");
      assertEquals(await ferry.deleteWebhook(w.id), { id: w.id, deleted: true });
      assertEquals(await ferry.webhooks("events"), []);
    });
  } finally {
    await receiver.shutdown();
  }
});

Deno.test("Ferry.stats(), health(), clusterStatus() and metrics()", async () => {
  await withBroker({}, async (ctx) => {
    const ferry = new Ferry({ url: ctx.url });
    await ferry.publish("s", "1");
    const stats = await ferry.stats();
    assertEquals([stats.totals.published, stats.topics.s?.depth], [1, 1]);
    const health = await ferry.health();
    assertEquals(health.status, "ok");
    assertMatch(health.version ?? "", /^\d+\.\d+\.\d+/);
    const cluster = await ferry.clusterStatus();
    assertEquals([cluster.mode, cluster.role, cluster.peers], ["standalone", "leader", []]);
    const text = await ferry.metrics();
    const published = parseMetrics(text).find((s) =>
      s.name === "ferry_messages_published_total" && s.labels.topic === "s"
    );
    assertEquals(published?.value, 1);
  });
});

Deno.test("Ferry.drain() drains: health() answers draining, and other calls a FerryError 503 once retries run out", async () => {
  await withBroker({}, async (ctx) => {
    const retries: number[] = [];
    const ferry = new Ferry({
      url: ctx.url,
      retries: 1,
      maxRetryDelayMs: 10,
      onRetry: (r) => retries.push(r.error.status),
    });
    const d = await ferry.drain();
    assertEquals(d, { status: "draining", in_flight_requests: 0 });
    assertEquals(await ferry.health(), { status: "draining" });
    const e = await ferry.stats().catch((e) => e);
    assert(e instanceof FerryError);
    assertEquals([e.status, e.code, e.retryAfter], [503, "draining", 1]);
    assertEquals(retries, [503], "one retry, waiting Retry-After capped at maxRetryDelayMs");
  });
});

/** Dashboard routes the client serves through other endpoints, with the method that does. */
const SERVED_ELSEWHERE: Record<string, string> = {
  "POST /api/queues/publish": "publish() uses POST /publish/{topic}",
  "POST /api/queues/consume": "consume() uses GET /consume/{topic}",
  "GET /api/queues/webhooks": "webhooks(topic) uses GET /api/webhooks?topic=",
  "GET /cluster/replicate": "between the nodes of a cluster, not for clients",
  "GET /dashboard/:file": "the dashboard's files, for browsers",
  "GET /openapi.json": "the API reference, for tools",
  "GET /asyncapi.json": "the API reference, for tools",
  "GET /docs": "the API reference page, for browsers",
  "GET /docs/:file": "the API reference page, for browsers",
};

Deno.test("some Ferry method reaches every route of the broker's route table", async () => {
  await withBroker({ webhookAllow: LOOPBACK_ALLOW }, async (ctx) => {
    const ferry = new Ferry({ url: ctx.url });
    const hook = await ferry.addWebhook("cov", "http://127.0.0.1:9/none");
    await ferry.webhooks("cov");
    await ferry.webhookAttempts(hook.id);
    await ferry.deleteWebhook(hook.id);
    await ferry.createTopic("cov2");
    await ferry.createGroup("cov", "g");
    await ferry.groups("cov");
    await ferry.publishBatch("cov", ["a", "b"]);
    const [a, b] = await ferry.consume("cov", { limit: 2 });
    await ferry.touch("cov", a!.id);
    await ferry.touchMany("cov", [a!.id]);
    await ferry.ack("cov", a!.id);
    await ferry.ackMany("cov", [b!.id]);
    await ferry.publish("cov", "c");
    await ferry.requeue((await ferry.consume("cov"))[0]!);
    await ferry.peek("cov");
    await ferry.queues();
    await ferry.redrive("cov");
    await ferry.purge("cov");
    await ferry.redrive("cov", { ids: ["none"] });
    assertEquals((await ferry.topic("cov2")).name, "cov2");
    assertEquals((await ferry.topics()).map((t) => t.name), ["cov", "cov2"]);
    await ferry.publish("cov", "held");
    const [held] = await ferry.consume("cov", { visibility: "1m" });
    const leased = await ferry.inFlight("cov");
    assertEquals(leased.map((m) => m.id), [held!.id]);
    assertEquals((await ferry.release("cov", held!.id)).retry_count, 0);
    assertEquals((await ferry.rates()).interval_seconds, 5);
    await ferry.deleteTopic("cov2");
    await ferry.stats();
    await ferry.health();
    await ferry.clusterStatus();
    const ac = new AbortController();
    const events = ferry.stream("cov", { signal: ac.signal });
    const heard = (async () => {
      for await (const m of events) return m;
    })();
    const sub = ferry.subscribe("cov", () => {});
    await sub.ready;
    await ferry.publish("cov", "d");
    assertEquals((await heard)?.payload_text, "d");
    await sub.close();
    ac.abort();
    await ferry.metrics(); // the next scrape counts this one
    const reached = new Set(
      parseMetrics(await ferry.metrics())
        .filter((s) => s.name === "ferry_http_requests_total")
        .map((s) => s.labels.route),
    );
    await ferry.drain(); // last: it ends the broker (its answer is checked by the test above)
    const missing = ROUTES.filter((r) => !reached.has(r.pattern) && r.pattern !== "/api/drain")
      .map((r) => `${r.method} ${r.pattern}`)
      .filter((r) => !(r in SERVED_ELSEWHERE));
    assertEquals(missing, [], "routes no client method calls");
  });
});
