/**
 * The dashboard's JSON interface (/api/queues/*) through the HTTP server.
 */

import assert from "node:assert/strict";
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

/** POST /webhook/{topic} arrives with the webhooks issue. */
const WEBHOOKS_PENDING = true;

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
    assert.ok(shop, `shop not listed: ${JSON.stringify(items)}`);
    for (const k of ITEM_FIELDS) assert.ok(k in shop, `item lacks ${k}: ${JSON.stringify(shop)}`);
    assert.equal(shop.in_flight, 1);
    assert.equal(shop.delayed, 1);
    assert.equal(shop.dlq_depth, 1);
    assert.equal(shop.policy, "reject");
    assert.equal(shop.retain, "1h");
    assert.equal(typeof shop.depth, "number");
    assert.ok(shop.depth >= 2, `depth counts the ready messages: ${JSON.stringify(shop)}`);
    assert.equal(typeof shop.oldest_age_seconds, "number");
    assert.ok(shop.oldest_age_seconds >= 5, JSON.stringify(shop));
    // `groups` may be a count or a list of names; either way billing is in it.
    if (typeof shop.groups === "number") assert.ok(shop.groups >= 1, JSON.stringify(shop));
    else assert.ok(JSON.stringify(shop.groups).includes("billing"), JSON.stringify(shop));
  });
});

Deno.test("POST /api/queues/publish answers 201 like /publish", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("POST", "/api/queues/publish", {
      json: { queue: "dash", payload: "from the dashboard", priority: "high", ttl: "1m" },
    });
    assert.equal(res.status, 201, res.text);
    const b = res.body;
    assert.match(b.id, UUID_V7);
    assert.equal(b.topic, "dash");
    assert.equal(b.priority, "high");
    assert.equal(b.deduplicated, false);
    assert.equal(Date.parse(b.expires_at) - Date.parse(b.timestamp), 60_000);
    assert.equal("visible_at" in b, false);
    const m = await consume(ctx, "dash");
    assert.equal(m.id, b.id);
    assert.equal(m.payload_text, "from the dashboard");
    assert.equal(m.priority, "high");
  });
});

Deno.test("POST /api/queues/publish with delay hides the message", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("POST", "/api/queues/publish", {
      json: { queue: "dashd", payload: "later", delay: "10s" },
    });
    assert.equal(res.status, 201, res.text);
    assert.equal(Date.parse(res.body.visible_at) - Date.parse(res.body.timestamp), 10_000);
    await assertEmpty(ctx, "dashd");
    await ctx.tick(10_000);
    assert.equal((await consume(ctx, "dashd")).payload_text, "later");
  });
});

Deno.test("POST /api/queues/publish with broadcast reaches waiting consumers only", async () => {
  await withBroker({}, async (ctx) => {
    const waiting = ctx.start("GET", "/consume/dashb?timeout=5s");
    await settle(ctx.url);
    const res = await ctx.call("POST", "/api/queues/publish", {
      json: { queue: "dashb", payload: "hey", broadcast: true },
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { broadcast: true, delivered_to: 1 });
    const got = await waiting;
    assert.equal(got.status, 200, got.text);
    assert.equal(got.body.payload_text, "hey");
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
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.id, p.id);
    assert.equal(res.body.topic, "dc");
    assert.equal(res.body.payload_text, "take me");
    assert.equal(res.body.retry_count, 0);
    const empty = await ctx.call("POST", "/api/queues/consume", { json: { queue: "dc" } });
    assertProblem(empty, 404, "queue_empty");
  });
});

Deno.test("GET /api/queues/peek returns at most 10 messages and removes none", async () => {
  await withBroker({}, async (ctx) => {
    for (let i = 0; i < 12; i++) await publish(ctx, "pk", `m${i}`);
    const res = await ctx.call("GET", "/api/queues/peek?queue=pk");
    assert.equal(res.status, 200, res.text);
    assert.ok(Array.isArray(res.body), res.text);
    assert.equal(res.body.length, 10);
    assert.deepEqual(res.body.map(textOf), Array.from({ length: 10 }, (_, i) => `m${i}`));
    const all = await consume(ctx, "pk", "limit=100");
    assert.equal(all.length, 12);
  });
});

Deno.test("DELETE /api/queues/purge empties the queue: {queue, purged}", async () => {
  await withBroker({}, async (ctx) => {
    for (let i = 0; i < 4; i++) await publish(ctx, "pg", `m${i}`);
    const res = await ctx.call("DELETE", "/api/queues/purge?queue=pg");
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.queue, "pg");
    assert.equal(res.body.purged, 4);
    await assertEmpty(ctx, "pg");
    await ctx.tick(60_000);
    await assertEmpty(ctx, "pg");
    await publish(ctx, "pg", "fresh"); // the queue still works
    assert.equal((await consume(ctx, "pg")).payload_text, "fresh");
  });
});

Deno.test("DELETE /api/queues/delete removes the queue and its WAL file", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "gone", "x");
    const wal = `${ctx.dataDir}/gone.wal`;
    assert.ok(await exists(wal), "publish wrote the topic's WAL file");
    const res = await ctx.call("DELETE", "/api/queues/delete?queue=gone");
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { queue: "gone", deleted: true });
    assert.equal(await exists(wal), false, "the WAL file is deleted");
    const names = [...(await queues(ctx)).keys()];
    assert.ok(!names.includes("gone"), JSON.stringify(names));
    // Publishing again starts a fresh, empty topic.
    await publish(ctx, "gone", "new");
    const all = await consume(ctx, "gone", "limit=10");
    assert.deepEqual(all.map(textOf), ["new"]);
  });
});

Deno.test("GET /api/queues/webhooks answers a list", async () => {
  await withBroker({}, async (ctx) => {
    assert.equal((await ctx.call("POST", "/api/topics", { json: { name: "hooks" } })).status, 201);
    const res = await ctx.call("GET", "/api/queues/webhooks?queue=hooks");
    assert.equal(res.status, 200, res.text);
    assert.ok(Array.isArray(res.body), res.text);
  });
});

Deno.test({
  name: "GET /api/queues/webhooks lists a registered webhook, never its secret",
  // Webhook registration is its own issue; these tests are ready for it.
  ignore: WEBHOOKS_PENDING,
}, async () => {
  await withBroker({}, async (ctx) => {
    assert.equal((await ctx.call("POST", "/api/topics", { json: { name: "hooks" } })).status, 201);
    // No message is ever published to this topic, so nothing is sent to the url.
    const reg = await ctx.call("POST", "/webhook/hooks", {
      json: { url: "http://127.0.0.1:9/hook", secret: "s3cret-value" },
    });
    assert.equal(reg.status, 201, reg.text);
    assert.equal(reg.body.url, "http://127.0.0.1:9/hook");
    assert.equal(reg.body.topic, "hooks");
    assert.equal(reg.body.signed, true);
    assert.ok(!reg.text.includes("s3cret-value"), "the secret is never echoed");

    const list = await ctx.call("GET", "/api/queues/webhooks?queue=hooks");
    assert.equal(list.status, 200, list.text);
    assert.ok(Array.isArray(list.body), list.text);
    const urls = list.body.map((w: Json) => typeof w === "string" ? w : w.url);
    assert.deepEqual(urls, ["http://127.0.0.1:9/hook"]);
    assert.ok(!list.text.includes("s3cret-value"), "the secret is never listed");
  });
});

Deno.test("POST /api/queues/redrive without queue is 400", async () => {
  await withBroker({}, async (ctx) => {
    assertProblem(await ctx.call("POST", "/api/queues/redrive"), 400);
    assertProblem(await ctx.call("DELETE", "/api/queues/purge"), 400);
    assertProblem(await ctx.call("GET", "/api/queues/peek"), 400);
  });
});
