/**
 * The dashboard's JSON interface (/api/queues/*) through the HTTP server.
 */

import { assert, assertEquals, assertMatch } from "../_support/assert.ts";
import { exists } from "../_support/files.ts";
import {
  assertEmpty,
  assertProblem,
  consume,
  deadLetter,
  type Json,
  publish,
  queues,
  settle,
  textOf,
  UUID_V7,
} from "../_support/http.ts";
import { withBroker } from "../_support/server.ts";
import { LOOPBACK_ALLOW } from "../../lib/push/egress.ts";

const ITEM_FIELDS = [
  "name",
  "depth",
  "in_flight",
  "delayed",
  "dlq_depth",
  "groups",
  "policy",
  "retain",
  "oldest_age_seconds",
];

Deno.test("GET /api/queues lists every queue with the contract's fields", async () => {
  await withBroker({}, async (ctx) => {
    await ctx.call("POST", "/api/topics", { json: { name: "shop", retain: "1h" } });
    await ctx.call("POST", "/api/groups", { json: { topic: "shop", group: "billing" } });
    await deadLetter(ctx, "shop", "dead");
    for (const t of ["a", "b", "c"]) await publish(ctx, "shop", t);
    await publish(ctx, "shop", "later", "delay=1m");
    await consume(ctx, "shop"); // one in flight
    await ctx.tick(5_000);

    const items = [...(await queues(ctx)).values()];
    const shop = items.find((q) => q.name === "shop");
    assert(shop, `shop not listed: ${JSON.stringify(items)}`);
    for (const k of ITEM_FIELDS) assert(k in shop, `item lacks ${k}: ${JSON.stringify(shop)}`);
    assertEquals(shop.in_flight, 1);
    assertEquals(shop.delayed, 1);
    assertEquals(shop.dlq_depth, 1);
    assertEquals(shop.policy, "reject");
    assertEquals(shop.retain, "1h");
    assertEquals(typeof shop.depth, "number");
    assert(shop.depth >= 2, `depth counts the ready messages: ${JSON.stringify(shop)}`);
    assertEquals(typeof shop.oldest_age_seconds, "number");
    assert(shop.oldest_age_seconds >= 5, JSON.stringify(shop));
    // `groups` may be a count or a list of names; either way billing is in it.
    if (typeof shop.groups === "number") assert(shop.groups >= 1, JSON.stringify(shop));
    else assert(JSON.stringify(shop.groups).includes("billing"), JSON.stringify(shop));
  });
});

Deno.test("POST /api/queues/publish answers 201 like /publish", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("POST", "/api/queues/publish", {
      json: { queue: "dash", payload: "from the dashboard", priority: "high", ttl: "1m" },
    });
    assertEquals(res.status, 201, res.text);
    const b = res.body;
    assertMatch(b.id, UUID_V7);
    assertEquals(b.topic, "dash");
    assertEquals(b.priority, "high");
    assertEquals(b.deduplicated, false);
    assertEquals(Date.parse(b.expires_at) - Date.parse(b.timestamp), 60_000);
    assertEquals("visible_at" in b, false);
    const m = await consume(ctx, "dash");
    assertEquals(m.id, b.id);
    assertEquals(m.payload_text, "from the dashboard");
    assertEquals(m.priority, "high");
  });
});

Deno.test("POST /api/queues/publish with delay hides the message", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("POST", "/api/queues/publish", {
      json: { queue: "dashd", payload: "later", delay: "10s" },
    });
    assertEquals(res.status, 201, res.text);
    assertEquals(Date.parse(res.body.visible_at) - Date.parse(res.body.timestamp), 10_000);
    await assertEmpty(ctx, "dashd");
    await ctx.tick(10_000);
    assertEquals((await consume(ctx, "dashd")).payload_text, "later");
  });
});

Deno.test("POST /api/queues/publish with broadcast reaches waiting consumers only", async () => {
  await withBroker({}, async (ctx) => {
    const waiting = ctx.start("GET", "/consume/dashb?timeout=5s");
    await settle(ctx.url);
    const res = await ctx.call("POST", "/api/queues/publish", {
      json: { queue: "dashb", payload: "hey", broadcast: true },
    });
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body, { broadcast: true, delivered_to: 1 });
    const got = await waiting;
    assertEquals(got.status, 200, got.text);
    assertEquals(got.body.payload_text, "hey");
    await assertEmpty(ctx, "dashb");
  });
});

Deno.test("POST /api/queues/publish refuses an empty payload and a bad queue", async () => {
  await withBroker({}, async (ctx) => {
    assertProblem(
      await ctx.call("POST", "/api/queues/publish", { json: { queue: "q", payload: "" } }),
      400,
    );
    assertProblem(
      await ctx.call("POST", "/api/queues/publish", { json: { queue: "../q", payload: "x" } }),
      400,
      "invalid_name",
    );
    assertProblem(await ctx.call("POST", "/api/queues/publish", { json: { payload: "x" } }), 400);
  });
});

Deno.test("POST /api/queues/consume {queue} answers one Message, 404 when empty", async () => {
  await withBroker({}, async (ctx) => {
    const p = await publish(ctx, "dc", "take me");
    const res = await ctx.call("POST", "/api/queues/consume", { json: { queue: "dc" } });
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body.id, p.id);
    assertEquals(res.body.topic, "dc");
    assertEquals(res.body.payload_text, "take me");
    assertEquals(res.body.retry_count, 0);
    const empty = await ctx.call("POST", "/api/queues/consume", { json: { queue: "dc" } });
    assertProblem(empty, 404, "queue_empty");
  });
});

Deno.test("GET /api/queues/peek returns at most 10 messages and removes none", async () => {
  await withBroker({}, async (ctx) => {
    for (let i = 0; i < 12; i++) await publish(ctx, "pk", `m${i}`);
    const res = await ctx.call("GET", "/api/queues/peek?queue=pk");
    assertEquals(res.status, 200, res.text);
    assert(Array.isArray(res.body), res.text);
    assertEquals(res.body.length, 10);
    assertEquals(res.body.map(textOf), Array.from({ length: 10 }, (_, i) => `m${i}`));
    const all = await consume(ctx, "pk", "limit=100");
    assertEquals(all.length, 12);
  });
});

Deno.test("DELETE /api/queues/purge empties the queue: {queue, purged}", async () => {
  await withBroker({}, async (ctx) => {
    for (let i = 0; i < 4; i++) await publish(ctx, "pg", `m${i}`);
    const res = await ctx.call("DELETE", "/api/queues/purge?queue=pg");
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body.queue, "pg");
    assertEquals(res.body.purged, 4);
    await assertEmpty(ctx, "pg");
    await ctx.tick(60_000);
    await assertEmpty(ctx, "pg");
    await publish(ctx, "pg", "fresh"); // the queue still works
    assertEquals((await consume(ctx, "pg")).payload_text, "fresh");
  });
});

Deno.test("DELETE /api/queues/delete removes the queue and its WAL file", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "gone", "x");
    const wal = `${ctx.dataDir}/gone.wal`;
    assert(await exists(wal), "publish wrote the topic's WAL file");
    const res = await ctx.call("DELETE", "/api/queues/delete?queue=gone");
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body, { queue: "gone", deleted: true });
    assertEquals(await exists(wal), false, "the WAL file is deleted");
    const names = [...(await queues(ctx)).keys()];
    assert(!names.includes("gone"), JSON.stringify(names));
    // Publishing again starts a fresh, empty topic.
    await publish(ctx, "gone", "new");
    const all = await consume(ctx, "gone", "limit=10");
    assertEquals(all.map(textOf), ["new"]);
  });
});

Deno.test("GET /api/queues/webhooks answers a list", async () => {
  await withBroker({}, async (ctx) => {
    assertEquals(
      (await ctx.call("POST", "/api/topics", { json: { name: "hooks" } })).status,
      201,
    );
    const res = await ctx.call("GET", "/api/queues/webhooks?queue=hooks");
    assertEquals(res.status, 200, res.text);
    assert(Array.isArray(res.body), res.text);
  });
});

Deno.test("GET /api/queues/webhooks lists a registered webhook, never its secret", async () => {
  await withBroker({ webhookAllow: LOOPBACK_ALLOW }, async (ctx) => {
    assertEquals(
      (await ctx.call("POST", "/api/topics", { json: { name: "hooks" } })).status,
      201,
    );
    // No message is ever published to this topic, so nothing is sent to the url.
    const reg = await ctx.call("POST", "/webhook/hooks", {
      json: { url: "http://127.0.0.1:9/hook", secret: "s3cret-value" },
    });
    assertEquals(reg.status, 201, reg.text);
    assertEquals(reg.body.url, "http://127.0.0.1:9/hook");
    assertEquals(reg.body.topic, "hooks");
    assertEquals(reg.body.signed, true);
    assert(!reg.text.includes("s3cret-value"), "the secret is never echoed");

    const list = await ctx.call("GET", "/api/queues/webhooks?queue=hooks");
    assertEquals(list.status, 200, list.text);
    assert(Array.isArray(list.body), list.text);
    const urls = list.body.map((w: Json) => typeof w === "string" ? w : w.url);
    assertEquals(urls, ["http://127.0.0.1:9/hook"]);
    assert(!list.text.includes("s3cret-value"), "the secret is never listed");
  });
});

Deno.test("POST /api/queues/redrive without queue is 400", async () => {
  await withBroker({}, async (ctx) => {
    assertProblem(await ctx.call("POST", "/api/queues/redrive"), 400);
    assertProblem(await ctx.call("DELETE", "/api/queues/purge"), 400);
    assertProblem(await ctx.call("GET", "/api/queues/peek"), 400);
  });
});

Deno.test("GET /api/queues/inflight lists leased messages with their lease end; release readies one", async () => {
  await withBroker({}, async (ctx) => {
    assertEquals((await ctx.call("GET", "/api/queues/inflight?queue=jobs")).body, []);
    await publish(ctx, "jobs", "first");
    await publish(ctx, "jobs", "second");
    const a = await consume(ctx, "jobs", "visibility=60s");
    await consume(ctx, "jobs", "visibility=10s");
    const list = await ctx.call("GET", "/api/queues/inflight?queue=jobs");
    assertEquals(list.status, 200, list.text);
    assertEquals(list.body.map((m: Json) => [m.payload_text, m.lease_ends_at]), [
      ["second", new Date(ctx.clock.now + 10_000).toISOString()],
      ["first", new Date(ctx.clock.now + 60_000).toISOString()],
    ]);
    assertEquals((await ctx.call("GET", "/api/queues/inflight?queue=jobs&limit=1")).body.length, 1);
    const rel = await ctx.call("POST", "/api/queues/release", {
      json: { queue: "jobs", id: a.id },
    });
    assertEquals(rel.body, {
      id: a.id,
      queue: "jobs",
      group: "",
      retry_count: 0,
      status: "released",
    });
    const again = await consume(ctx, "jobs");
    assertEquals(
      [again.id, again.retry_count],
      [a.id, 0],
      "ready at once, not counted as an attempt",
    );
    assertProblem(
      await ctx.call("POST", "/api/queues/release", { json: { queue: "jobs", id: "nope" } }),
      404,
      "message_not_found",
    );
    assertProblem(await ctx.call("POST", "/api/queues/release", { json: { queue: "jobs" } }), 400);
    assertProblem(await ctx.call("GET", "/api/queues/inflight?queue=jobs&limit=0"), 400);
    assertProblem(await ctx.call("GET", "/api/queues/inflight"), 400);
  });
});

Deno.test("POST /api/queues/redrive with {ids} moves only the chosen dead letters", async () => {
  await withBroker({}, async (ctx) => {
    const one = await deadLetter(ctx, "jobs", "one");
    await deadLetter(ctx, "jobs", "two");
    const res = await ctx.call("POST", "/api/queues/redrive?queue=jobs", { json: { ids: [one] } });
    assertEquals(res.body, { queue: "jobs", source: "jobs.dlq", moved: 1 });
    assertEquals((await consume(ctx, "jobs")).payload_text, "one");
    assertEquals((await ctx.call("GET", "/api/queues/peek?queue=jobs.dlq")).body.length, 1);
    for (const json of [{ ids: "x" }, { ids: [1] }, {}]) {
      assertProblem(
        await ctx.call("POST", "/api/queues/redrive?queue=jobs", { json }),
        400,
        "bad_request",
      );
    }
    assertEquals((await ctx.call("POST", "/api/queues/redrive?queue=jobs")).body.moved, 1);
  });
});

Deno.test("GET /api/rates gives events per second over the last minutes, per queue", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "jobs", "x");
    await ctx.tick(0);
    for (let i = 0; i < 10; i++) await publish(ctx, "jobs", "x");
    await ctx.tick(5_000);
    const all = await ctx.call("GET", "/api/rates");
    assertEquals(all.status, 200, all.text);
    assertEquals(all.body.interval_seconds, 5);
    assertEquals(all.body.totals.map((p: Json) => p.published), [2]);
    assertEquals(all.body.topics.jobs.published, 2);
    assertEquals(all.body.totals[0].time, new Date(ctx.clock.now).toISOString());
    const one = await ctx.call("GET", "/api/rates?queue=jobs");
    assertEquals([one.body.queue, one.body.points.length, one.body.topics], ["jobs", 1, undefined]);
    assertEquals(Object.keys(one.body.points[0]).sort(), [
      "acked",
      "dead_lettered",
      "delivered",
      "expired",
      "published",
      "requeued",
      "time",
    ]);
    assertProblem(await ctx.call("GET", "/api/rates?queue=ghost"), 404, "not_found");
  });
});
