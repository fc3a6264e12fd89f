/**
 * POST /publish/{topic}/batch through the HTTP server on a real WAL: order and ids, one fsync
 * per request, idempotency per item, all-or-nothing refusals naming the bad item, limits,
 * NDJSON, caps and the memory budget, auth scope, metrics, drain, and a SIGKILL after the
 * answer losing nothing.
 */

import { assert, assertEquals, assertMatch } from "../_support/assert.ts";
import { start, stop, withDataDir } from "../_support/child.ts";
import {
  assertProblem,
  call,
  fromBase64,
  ISO_UTC,
  type Json,
  textOf,
  UUID_V7,
} from "../_support/http.ts";
import { parseMetrics, valueOf } from "../_support/metrics.ts";
import { startBroker, type TestBroker, withBroker } from "../_support/server.ts";
import type { ClusterState, WriteRoute } from "../../lib/cluster/state.ts";
import { clusterHook } from "../../routes/cluster.ts";

const NDJSON = { "content-type": "application/x-ndjson" };

function batch(ctx: TestBroker, topic: string, items: unknown, query = "") {
  return ctx.call("POST", `/publish/${topic}/batch${query}`, { json: items });
}

/** Every message of a topic, taken with one consume (and left in flight). */
async function takeAll(ctx: { url: string }, topic: string): Promise<Json[]> {
  const res = await call(ctx.url, "GET", `/consume/${topic}?limit=1000`);
  if (res.status === 404) return [];
  assertEquals(res.status, 200, res.text);
  return Array.isArray(res.body) ? res.body : [res.body];
}

async function metric(ctx: TestBroker, name: string, labels: Record<string, string> = {}) {
  const res = await ctx.call("GET", "/metrics");
  return valueOf(parseMetrics(res.text), name, labels) ?? 0;
}

Deno.test("POST /publish/{topic}/batch stores every message in order, one answer each", async () => {
  await withBroker({}, async (ctx) => {
    const bytes = new Uint8Array([0xff, 0xfe, 0, 1, 2, 250]);
    const items = [
      { payload_text: "first" },
      { payload: bytes.toBase64(), priority: "low", headers: { "X-MQ-Trace": "t-1" } },
      { payload_text: "later", delay: "5s", ttl: "1m" },
      ...Array.from({ length: 47 }, (_, i) => ({ payload_text: `m${i}` })),
    ];
    const res = await batch(ctx, "orders", items);
    assertEquals(res.status, 201, res.text);
    assertMatch(res.headers.get("content-type") ?? "", /^application\/json/);
    const answers: Json[] = res.body.messages;
    assertEquals(answers.length, 50);
    for (const a of answers) {
      assertMatch(a.id, UUID_V7);
      assertMatch(a.timestamp, ISO_UTC);
      assertEquals([a.topic, a.deduplicated], ["orders", false]);
    }
    const ids = answers.map((a) => a.id);
    assertEquals([...ids].sort(), ids, "ids grow in the order of the batch");
    assertEquals(new Set(ids).size, 50);
    assertEquals(answers[1].priority, "low");
    assertEquals(Date.parse(answers[2].visible_at) - Date.parse(answers[2].timestamp), 5_000);
    assertEquals(Date.parse(answers[2].expires_at) - Date.parse(answers[2].timestamp), 60_000);
    assertEquals("visible_at" in answers[0], false);

    const got = await takeAll(ctx, "orders");
    // Delivery order: normal priority first (FIFO), then low; the delayed one is hidden.
    assertEquals(got.length, 49);
    assertEquals(got.map((m) => m.id), [ids[0], ...ids.slice(3), ids[1]]);
    assertEquals(textOf(got[0]), "first");
    assertEquals(got[0].headers, {});
    assertEquals(fromBase64(got[48].payload), bytes);
    assertEquals(got[48].headers, { "x-mq-trace": "t-1" });
    assertEquals("payload_text" in got[48], false, "invalid UTF-8 has no payload_text");
    await ctx.tick(5_000);
    assertEquals((await takeAll(ctx, "orders")).map((m) => m.id), [ids[2]]);
  });
});

Deno.test("POST /publish/{topic}/batch costs one fsync for the whole request", async () => {
  await withBroker({ fsync: "always" }, async (ctx) => {
    await batch(ctx, "sync", [{ payload_text: "topic exists" }]);
    const before = await metric(ctx, "ferry_wal_fsync_seconds_count");
    const items = Array.from({ length: 500 }, (_, i) => ({ payload_text: `m${i}`.repeat(100) }));
    assertEquals((await batch(ctx, "sync", items)).status, 201);
    assertEquals(await metric(ctx, "ferry_wal_fsync_seconds_count") - before, 1);
  });
});

Deno.test("POST /publish/{topic}/batch dedupes each item on its idempotency key", async () => {
  await withBroker({}, async (ctx) => {
    const first = await batch(ctx, "idem", [
      { payload_text: "a", idempotency_key: "ka", priority: "high" },
      { payload_text: "b", idempotency_key: "kb" },
    ]);
    assertEquals(first.status, 201, first.text);
    const [a, b] = first.body.messages;
    const second = await batch(ctx, "idem", [
      { payload_text: "a again", idempotency_key: "ka" },
      { payload_text: "c", idempotency_key: "kc" },
      { payload_text: "no key" },
      { payload_text: "c again", idempotency_key: "kc" },
      { payload_text: "b again", idempotency_key: "kb" },
    ]);
    assertEquals(second.status, 201, second.text);
    const m = second.body.messages;
    assertEquals([m[0].id, m[0].deduplicated, m[0].priority], [a.id, true, "high"]);
    assertEquals(m[0].timestamp, a.timestamp);
    assertEquals(m[1].deduplicated, false);
    assertEquals(m[2].deduplicated, false);
    assertEquals([m[3].id, m[3].deduplicated], [m[1].id, true], "a key repeated in the batch");
    assertEquals([m[4].id, m[4].deduplicated], [b.id, true]);
    const all = await batch(ctx, "idem", [
      { payload_text: "x", idempotency_key: "kb" },
      { payload_text: "y", idempotency_key: "ka" },
    ]);
    assertEquals(all.status, 200, "every item deduplicated: nothing stored, as a single publish");
    assertEquals(all.body.messages.map((x: Json) => x.id), [b.id, a.id]);
    assertEquals((await takeAll(ctx, "idem")).map(textOf), ["a", "b", "c", "no key"]);
  });
});

Deno.test("POST /publish/{topic}/batch?idempotency=auto keys each item on its payload", async () => {
  await withBroker({}, async (ctx) => {
    const res = await batch(
      ctx,
      "auto",
      [{ payload_text: "same" }, { payload_text: "other" }, { payload_text: "same" }],
      "?idempotency=auto",
    );
    assertEquals(res.status, 201, res.text);
    const m = res.body.messages;
    assertEquals([m[2].id, m[2].deduplicated], [m[0].id, true]);
    assertEquals((await takeAll(ctx, "auto")).length, 2);
  });
});

/** Bad items, each placed at index 3 of a batch whose other items are fine. */
const BAD_ITEMS: [string, unknown, number, string, RegExp][] = [
  ["no payload", { ttl: "1s" }, 400, "invalid_parameter", /missing payload/],
  ["both payloads", { payload: "YQ==", payload_text: "a" }, 400, "invalid_parameter", /not both/],
  ["bad Base64", { payload: "!!!" }, 400, "invalid_parameter", /payload: not valid Base64/],
  ["payload not text", { payload: 12 }, 400, "invalid_parameter", /payload/],
  ["empty payload", { payload_text: "" }, 400, "empty_body", /empty/],
  ["bad ttl", { payload_text: "a", ttl: "soon" }, 400, "invalid_duration", /ttl/],
  ["delay too long", { payload_text: "a", delay: "400h" }, 400, "invalid_duration", /delay/],
  ["bad priority", { payload_text: "a", priority: "urgent" }, 400, "invalid_parameter", /prio/],
  [
    "unknown field",
    { payload_text: "a", tll: "1s" },
    400,
    "bad_request",
    /^messages\[3\]: unknown field "tll" \(did you mean "ttl"\?\); accepted: payload, payload_text,/,
  ],
  ["not an object", "hello", 400, "invalid_parameter", /message object/],
  [
    "key too long",
    { payload_text: "a", idempotency_key: "k".repeat(257) },
    400,
    "invalid_parameter",
    /idempotency_key/,
  ],
  [
    "header w/o prefix",
    { payload_text: "a", headers: { trace: "x" } },
    400,
    "invalid_parameter",
    /headers/,
  ],
  [
    "header not text",
    { payload_text: "a", headers: { "x-mq-a": 1 } },
    400,
    "invalid_parameter",
    /x-mq-a/,
  ],
  [
    "header line break",
    { payload_text: "a", headers: { "x-mq-a": "1\r\nX: y" } },
    400,
    "invalid_parameter",
    /x-mq-a/,
  ],
  [
    "too large",
    { payload: "A".repeat(2 * 1024 * 1024 * 4 / 3 + 8) },
    413,
    "payload_too_large",
    /payload/,
  ],
];

for (const [what, item, status, code, why] of BAD_ITEMS) {
  Deno.test(`POST /publish/{topic}/batch: ${what} at index 3 stores nothing and names it`, async () => {
    await withBroker({}, async (ctx) => {
      const ok = { payload_text: "fine", idempotency_key: "k-fine" };
      const res = await batch(ctx, "bad", [ok, ok, { payload_text: "x" }, item, ok]);
      assertProblem(res, status, code);
      assert(res.body.detail.includes("messages[3]"), res.body.detail);
      assertMatch(res.body.detail, why);
      assertEquals(await takeAll(ctx, "bad"), []);
      // The key of the refused batch was never taken.
      const again = await batch(ctx, "bad", [ok]);
      assertEquals([again.status, again.body.messages[0].deduplicated], [201, false]);
    });
  });
}

Deno.test("POST /publish/{topic}/batch refuses bodies that are not a batch", async () => {
  await withBroker({}, async (ctx) => {
    const send = (body: string, type = "application/json") =>
      ctx.call("POST", "/publish/b/batch", { body, headers: { "content-type": type } });
    assertProblem(await send("[{"), 400, "bad_request");
    assertProblem(await send('{"payload_text":"a"}'), 400, "bad_request");
    assertProblem(await send("[]"), 400, "empty_body");
    assertProblem(await send(""), 400, "empty_body");
    assertProblem(await send('[{"payload_text":"a"}]', "text/plain"), 400, "bad_request");
    const bad = await send('{"payload_text":"a"}\n{"payload_text":\n', "application/x-ndjson");
    assertProblem(bad, 400, "bad_request");
    assertMatch(bad.body.detail, /messages\[1\] \(line 2\)/);
    assertProblem(
      await ctx.call("POST", "/publish/b/batch", {
        body: new Uint8Array([0x5b, 0xff, 0x5d]),
        headers: { "content-type": "application/json" },
      }),
      400,
      "bad_request",
    );
    assertProblem(await send("[{}]", "application/json"), 400, "invalid_parameter");
    assertProblem(
      await ctx.call("POST", "/publish/b/batch?idempotency=yes", { json: [{ payload_text: "a" }] }),
      400,
      "invalid_parameter",
    );
    assertProblem(await ctx.call("POST", "/publish/b..c/batch", { json: [] }), 400, "invalid_name");
    assertEquals(await takeAll(ctx, "b"), []);
  });
});

Deno.test("POST /publish/{topic}/batch takes at most 1,000 messages and 16 MiB", async () => {
  await withBroker({}, async (ctx) => {
    const item = { payload_text: "x" };
    assertEquals((await batch(ctx, "lim", Array(1000).fill(item))).status, 201);
    const over = await batch(ctx, "lim", Array(1001).fill(item));
    assertProblem(over, 400, "invalid_parameter");
    assertMatch(over.body.detail, /1001/);
    const lines = Array(1001).fill(JSON.stringify(item)).join("\n");
    const overLines = await ctx.call("POST", "/publish/lim/batch", {
      body: lines,
      headers: NDJSON,
    });
    assertProblem(overLines, 400, "invalid_parameter");
    const huge = new Uint8Array(16 * 1024 * 1024 + 1).fill(0x20);
    assertProblem(
      await ctx.call("POST", "/publish/lim/batch", {
        body: huge,
        headers: { "content-type": "application/json" },
      }),
      413,
      "payload_too_large",
    );
    assertEquals((await takeAll(ctx, "lim")).length, 1000);
  });
});

Deno.test("POST /publish/{topic}/batch reads NDJSON, one message per line", async () => {
  await withBroker({}, async (ctx) => {
    const body = '{"payload_text":"a"}\r\n\n  \n{"payload":"Yg==","priority":"high"}\n' +
      '{"payload_text":"c","headers":{"x-mq-k":"v"}}';
    const res = await ctx.call("POST", "/publish/nd/batch", {
      body,
      headers: { "content-type": "application/x-ndjson; charset=utf-8" },
    });
    assertEquals(res.status, 201, res.text);
    assertEquals(res.body.messages.length, 3);
    const got = await takeAll(ctx, "nd");
    assertEquals(got.map(textOf), ["b", "a", "c"]);
    assertEquals(got[2].headers, { "x-mq-k": "v" });
  });
});

Deno.test("POST /publish/{topic}/batch is all or nothing against the topic's caps", async () => {
  await withBroker({}, async (ctx) => {
    const items = (n: number, tag: string) =>
      Array.from({ length: n }, (_, i) => ({ payload_text: `${tag}${i}` }));
    await ctx.call("POST", "/api/topics", { json: { name: "rej", max_messages: 10 } });
    assertEquals((await batch(ctx, "rej", items(8, "a"))).status, 201);
    const full = await batch(ctx, "rej", items(3, "b"));
    assertProblem(full, 429, "queue_full");
    assertEquals((await takeAll(ctx, "rej")).length, 8, "none of the refused batch is stored");

    await ctx.call("POST", "/api/topics", {
      json: { name: "drop", max_messages: 10, policy: "drop-oldest" },
    });
    assertEquals((await batch(ctx, "drop", items(8, "a"))).status, 201);
    assertEquals((await batch(ctx, "drop", items(5, "b"))).status, 201);
    assertProblem(await batch(ctx, "drop", items(11, "c")), 429, "queue_full");
    const kept = (await takeAll(ctx, "drop")).map(textOf);
    assertEquals(kept, ["a3", "a4", "a5", "a6", "a7", "b0", "b1", "b2", "b3", "b4"]);
    const rejected = await metric(ctx, "ferry_messages_rejected_total", {
      topic: "rej",
      reason: "queue_full",
    });
    assertEquals(rejected, 3, "each refused message counts");
  });
});

Deno.test("POST /publish/{topic}/batch is all or nothing against the memory budget", async () => {
  await withBroker({ maxMemoryBytes: 64 * 1024 }, async (ctx) => {
    const kib = (tag: string) => ({ payload_text: tag + "x".repeat(8 * 1024) });
    assertEquals((await batch(ctx, "mem", [kib("a"), kib("b")])).status, 201);
    const res = await batch(ctx, "mem", Array.from({ length: 6 }, (_, i) => kib(`c${i}`)));
    assertProblem(res, 429, "memory_full");
    assert(res.headers.get("retry-after"));
    assertEquals((await takeAll(ctx, "mem")).length, 2);
  });
});

Deno.test("POST /publish/{topic}/batch counts each message as a publish", async () => {
  await withBroker({}, async (ctx) => {
    await batch(ctx, "met", Array(30).fill({ payload_text: "x" }));
    await batch(ctx, "met", Array(5).fill({ payload_text: "y" }));
    assertEquals(await metric(ctx, "ferry_messages_published_total", { topic: "met" }), 35);
    assertEquals(await metric(ctx, "ferry_publish_batch_messages_count"), 2);
    assertEquals(await metric(ctx, "ferry_publish_batch_messages_sum"), 35);
    assertEquals(await metric(ctx, "ferry_publish_batch_messages_bucket", { le: "10" }), 1);
    assertEquals((await ctx.call("GET", "/api/stats")).body.totals.published, 35);
  });
});

Deno.test("POST /publish/{topic}/batch needs the publish scope and refuses while draining", async () => {
  const b = await startBroker({ apiKeys: "pub-k:publish,con-k:consume" });
  try {
    const send = (key?: string) =>
      call(b.url, "POST", "/publish/auth/batch", {
        json: [{ payload_text: "a" }],
        headers: key ? { authorization: `Bearer ${key}` } : {},
      });
    assertProblem(await send(), 401, "unauthorized");
    assertProblem(await send("con-k"), 403, "forbidden");
    assertEquals((await send("pub-k")).status, 201);
    b.broker.draining = true;
    assertProblem(await send("pub-k"), 503, "draining");
  } finally {
    b.broker.draining = false;
    await b.close();
  }
});

Deno.test("POST /publish/{topic}/batch on a follower is a 307 to the leader; 503 while electing", async () => {
  let where: WriteRoute = { kind: "leader", url: "http://10.0.0.7:7800" };
  const state = { route: () => where } as unknown as ClusterState;
  const b = await startBroker({}, { before: [clusterHook(state)] });
  try {
    const send = () =>
      fetch(`${b.url}/publish/t/batch?idempotency=auto`, {
        method: "POST",
        body: '[{"payload_text":"a"}]',
        headers: { "content-type": "application/json" },
        redirect: "manual",
      });
    const res = await send();
    await res.body?.cancel();
    assertEquals(res.status, 307);
    assertEquals(
      res.headers.get("location"),
      "http://10.0.0.7:7800/publish/t/batch?idempotency=auto",
    );
    where = { kind: "electing" };
    const electing = await send();
    assertEquals([electing.status, (await electing.json()).code], [503, "electing"]);
    assertEquals(b.broker.findTopic("t"), undefined, "nothing stored on the follower");
  } finally {
    await b.close();
  }
});

Deno.test("POST /publish/{topic}/batch: every answered message survives a SIGKILL", async () => {
  await withDataDir(async (dir) => {
    let child = await start(dir, { BROKER_FSYNC: "always" });
    const sent: string[] = [];
    const ids: string[] = [];
    const requests = Array.from({ length: 8 }, async (_, r) => {
      const items = Array.from({ length: 100 }, (_, i) => ({ payload_text: `r${r}-${i}` }));
      const res = await call(child.url, "POST", "/publish/kept/batch", { json: items });
      assertEquals(res.status, 201, res.text);
      sent.push(...items.map((x) => x.payload_text));
      ids.push(...res.body.messages.map((m: Json) => m.id));
    });
    await Promise.all(requests);
    await stop(child, "SIGKILL");
    child = await start(dir);
    const got: Json[] = [];
    for (let page = 0; page < 2; page++) got.push(...await takeAll(child, "kept"));
    assertEquals(got.length, 800);
    assertEquals(new Set(got.map((m) => m.id)), new Set(ids));
    assertEquals(new Set(got.map(textOf)), new Set(sent));
    await stop(child, "SIGKILL");
  });
});
