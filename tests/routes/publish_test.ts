/**
 * POST /publish/{topic} through the HTTP server: answer shape, ids, bytes, limits, ttl, delay,
 * priority, idempotency, X-MQ-* headers, broadcast and the queue cap.
 */

import { assert, assertEquals, assertMatch, assertNotEquals } from "../_support/assert.ts";
import {
  assertEmpty,
  assertProblem,
  consume,
  fromBase64,
  ISO_UTC,
  type Json,
  publish,
  settle,
  textOf,
  UUID_V7,
} from "../_support/http.ts";
import { bind, Clock, startBroker, withBroker } from "../_support/server.ts";
import { within } from "../_support/wait.ts";

const MB2 = 2 * 1024 * 1024;

/** Milliseconds encoded in the first 48 bits of a UUIDv7. */
function uuidMs(id: string): number {
  return parseInt(id.replaceAll("-", "").slice(0, 12), 16);
}

Deno.test("POST /publish answers 201 {id,topic,timestamp,priority,deduplicated:false}", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("POST", "/publish/orders", { body: "hello" });
    assertEquals(res.status, 201, res.text);
    assertMatch(res.headers.get("content-type") ?? "", /^application\/json/);
    const b = res.body;
    assertEquals(b.topic, "orders");
    assertMatch(b.id, UUID_V7);
    assertMatch(b.timestamp, ISO_UTC);
    assertEquals(b.priority, "normal");
    assertEquals(b.deduplicated, false);
    assertEquals("visible_at" in b, false, "no visible_at without delay");
    assertEquals("expires_at" in b, false, "no expires_at without ttl");
  });
});

Deno.test("POST /publish with delay and ttl adds visible_at and expires_at", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("POST", "/publish/orders?delay=5s&ttl=1m&priority=high", {
      body: "x",
    });
    assertEquals(res.status, 201, res.text);
    const b = res.body;
    assertEquals(b.priority, "high");
    assertMatch(b.visible_at, ISO_UTC);
    assertMatch(b.expires_at, ISO_UTC);
    assertEquals(Date.parse(b.visible_at) - Date.parse(b.timestamp), 5_000);
    assertEquals(Date.parse(b.expires_at) - Date.parse(b.timestamp), 60_000);
  });
});

Deno.test("POST /publish ids are UUIDv7 and ordered by publish time", async () => {
  await withBroker({}, async (ctx) => {
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      ctx.clock.advance(2);
      ids.push((await publish(ctx, "ids", `m${i}`)).id);
    }
    for (const id of ids) assertMatch(id, UUID_V7);
    assertEquals([...ids].sort(), ids, "ids sort in publish order");
    for (let i = 1; i < ids.length; i++) {
      assert(uuidMs(ids[i]!) >= uuidMs(ids[i - 1]!), "UUIDv7 time prefix never goes back");
    }
    assertEquals(new Set(ids).size, ids.length);
  });
});

Deno.test("POST /publish round-trips raw bytes, including invalid UTF-8", async () => {
  await withBroker({}, async (ctx) => {
    const bytes = new Uint8Array(512);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7 + 3) % 256;
    bytes[0] = 0xff; // never valid UTF-8
    bytes[1] = 0xfe;
    await publish(ctx, "bin", bytes, "", { "content-type": "application/octet-stream" });
    const msg = await consume(ctx, "bin");
    assertEquals(fromBase64(msg.payload), bytes);
  });
});

Deno.test("POST /publish of UTF-8 text gives payload_text equal to the text", async () => {
  await withBroker({}, async (ctx) => {
    const text = "héllo wörld ✓ 日本 🚢";
    await publish(ctx, "txt", text);
    const msg = await consume(ctx, "txt");
    assertEquals(msg.payload_text, text);
    assertEquals(textOf(msg), text);
    assertEquals(msg.topic, "txt");
    assertEquals(msg.retry_count, 0);
    assertMatch(msg.timestamp, ISO_UTC);
    assertMatch(msg.id, UUID_V7);
    assertEquals(msg.priority, "normal");
  });
});

Deno.test("POST /publish accepts exactly 2 MiB and refuses one byte more with 413", async () => {
  await withBroker({}, async (ctx) => {
    const ok = new Uint8Array(MB2).fill(0x61);
    await publish(ctx, "big", ok);
    const msg = await consume(ctx, "big");
    assertEquals(fromBase64(msg.payload).length, MB2);

    const res = await ctx.call("POST", "/publish/big", { body: new Uint8Array(MB2 + 1) });
    assertProblem(res, 413, "payload_too_large");
    await assertEmpty(ctx, "big");
  });
});

Deno.test("POST /publish refuses a chunked body over 2 MiB with 413", async () => {
  await withBroker({}, async (ctx) => {
    // A stream body has no Content-Length, so the broker has to count the bytes itself.
    const chunk = new Uint8Array(64 * 1024).fill(0x62);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent > MB2) return c.close();
        sent += chunk.length;
        c.enqueue(chunk);
      },
    });
    const res = await ctx.call("POST", "/publish/big", { body }).catch((e) => e as Error);
    // The broker may close the connection once it has seen enough; an answer, if any, is 413.
    if (!(res instanceof Error)) assertProblem(res, 413, "payload_too_large");
    await assertEmpty(ctx, "big");
  });
});

Deno.test("POST /publish with an empty body is 400 empty_body", async () => {
  await withBroker({}, async (ctx) => {
    assertProblem(await ctx.call("POST", "/publish/e"), 400, "empty_body");
    assertProblem(await ctx.call("POST", "/publish/e", { body: "" }), 400, "empty_body");
  });
});

Deno.test("POST /publish creates the topic on first use", async () => {
  await withBroker({}, async (ctx) => {
    const before = await ctx.call("GET", "/api/queues");
    assertEquals(before.status, 200);
    assert(!JSON.stringify(before.body).includes("fresh-topic"));
    await publish(ctx, "fresh-topic", "a");
    const after = await ctx.call("GET", "/api/queues");
    assert(JSON.stringify(after.body).includes('"fresh-topic"'), after.text);
  });
});

Deno.test("POST /publish to a new topic past BROKER_MAX_TOPICS is 403 topic_limit_reached", async () => {
  await withBroker({ maxTopics: 2 }, async (ctx) => {
    await publish(ctx, "a", "1");
    await publish(ctx, "b", "1");
    assertProblem(await ctx.call("POST", "/publish/c", { body: "1" }), 403, "topic_limit_reached");
    await publish(ctx, "a", "2"); // existing topics still take messages
    const created = await ctx.call("POST", "/api/topics", { json: { name: "d" } });
    assertProblem(created, 403, "topic_limit_reached");
  });
});

Deno.test("POST /publish?ttl drops the message once the ttl has passed", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "ttl", "short", "ttl=10s");
    await publish(ctx, "ttl", "forever");
    await ctx.tick(9_000);
    const peeked = await consume(ctx, "ttl", "peek=true&limit=10");
    assertEquals(peeked.map(textOf), ["short", "forever"]);
    assert(peeked[0].expires_at, "a message with ttl carries expires_at");
    await ctx.tick(2_000);
    const left = await consume(ctx, "ttl", "limit=10");
    assertEquals(left.map(textOf), ["forever"]);
  });
});

Deno.test("POST /publish?ttl also drops a delayed message that was never consumed", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "ttl2", "late", "delay=10s&ttl=5s");
    await ctx.tick(11_000);
    await assertEmpty(ctx, "ttl2");
  });
});

Deno.test("POST /publish?delay hides the message until the delay has passed", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "later", "d", "delay=5s");
    await assertEmpty(ctx, "later");
    await ctx.tick(4_000);
    await assertEmpty(ctx, "later");
    await ctx.tick(1_000);
    const msg = await consume(ctx, "later");
    assertEquals(textOf(msg), "d");
  });
});

Deno.test("POST /publish?priority delivers high before normal before low, FIFO within", async () => {
  await withBroker({}, async (ctx) => {
    const order = [
      ["low", "l1"],
      ["normal", "n1"],
      ["high", "h1"],
      ["low", "l2"],
      ["high", "h2"],
      ["", "n2"],
      ["normal", "n3"],
      ["high", "h3"],
    ];
    for (const [p, text] of order) await publish(ctx, "prio", text!, p ? `priority=${p}` : "");
    const first = await consume(ctx, "prio");
    assertEquals(textOf(first), "h1");
    assertEquals(first.priority, "high");
    const rest = await consume(ctx, "prio", "limit=100");
    assertEquals(rest.map(textOf), ["h2", "h3", "n1", "n2", "n3", "l1", "l2"]);
    assertEquals(rest.map((m: Json) => m.priority), [
      "high",
      "high",
      "normal",
      "normal",
      "normal",
      "low",
      "low",
    ]);
  });
});

Deno.test("POST /publish with a repeated Idempotency-Key answers 200 with the first id", async () => {
  await withBroker({}, async (ctx) => {
    const first = await publish(ctx, "idem", "one", "", { "idempotency-key": "k-1" });
    const again = await ctx.call("POST", "/publish/idem", {
      body: "two",
      headers: { "idempotency-key": "k-1" },
    });
    assertEquals(again.status, 200, again.text);
    assertEquals(again.body.id, first.id);
    assertEquals(again.body.topic, "idem");
    assertEquals(again.body.deduplicated, true);
    assert(again.body.timestamp && again.body.priority);
    const all = await consume(ctx, "idem", "limit=10");
    assertEquals(all.map(textOf), ["one"], "the duplicate is discarded");
    // Keys are per topic.
    const other = await publish(ctx, "idem-other", "two", "", { "idempotency-key": "k-1" });
    assertNotEquals(other.id, first.id);
    assertEquals(other.deduplicated, false);
  });
});

Deno.test("POST /publish idempotency keys expire after 5 minutes", async () => {
  await withBroker({}, async (ctx) => {
    const a = await publish(ctx, "idem", "a", "", { "idempotency-key": "key-a" });
    await publish(ctx, "idem", "b", "", { "idempotency-key": "key-b" });
    await ctx.tick(5 * 60_000 - 1_000);
    const dup = await ctx.call("POST", "/publish/idem", {
      body: "a",
      headers: { "idempotency-key": "key-a" },
    });
    assertEquals(dup.status, 200, dup.text);
    assertEquals(dup.body.id, a.id);
    await ctx.tick(2_000); // 5 min + 1 s after key-b was first seen
    const fresh = await ctx.call("POST", "/publish/idem", {
      body: "b",
      headers: { "idempotency-key": "key-b" },
    });
    assertEquals(fresh.status, 201, fresh.text);
    assertEquals(fresh.body.deduplicated, false);
  });
});

Deno.test("POST /publish?idempotency=auto dedupes on the payload bytes", async () => {
  await withBroker({}, async (ctx) => {
    const first = await publish(ctx, "auto", "same", "idempotency=auto");
    const again = await ctx.call("POST", "/publish/auto?idempotency=auto", { body: "same" });
    assertEquals(again.status, 200, again.text);
    assertEquals(again.body.id, first.id);
    assertEquals(again.body.deduplicated, true);
    const diff = await publish(ctx, "auto", "different", "idempotency=auto");
    assertNotEquals(diff.id, first.id);
    const all = await consume(ctx, "auto", "limit=10");
    assertEquals(all.map(textOf), ["same", "different"]);
  });
});

Deno.test("POST /publish idempotency keys and messages survive a restart", async () => {
  const clock = new Clock();
  const first = await startBroker({}, { clock: clock.fn });
  const dataDir = first.dataDir;
  let firstOpen = true;
  let second;
  try {
    const ctx1 = bind(first, clock);
    const orig = await publish(ctx1, "durable", "kept", "", { "idempotency-key": "restart-key" });
    firstOpen = false;
    await first.close({ keepData: true });
    clock.advance(60_000);
    second = await startBroker({ dataDir }, { clock: clock.fn });
    const ctx2 = bind(second, clock);
    const dup = await ctx2.call("POST", "/publish/durable", {
      body: "again",
      headers: { "idempotency-key": "restart-key" },
    });
    assertEquals(dup.status, 200, dup.text);
    assertEquals(dup.body.id, orig.id);
    assertEquals(dup.body.deduplicated, true);
    const all = await consume(ctx2, "durable", "limit=10");
    assertEquals(all.map(textOf), ["kept"]);
    assertEquals(all[0].id, orig.id);
  } finally {
    if (firstOpen) await first.close({ keepData: true });
    if (second) await second.close();
    else await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
});

Deno.test("POST /publish stores X-MQ-* headers, returned lower-cased in `headers`", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "hdr", "x", "", {
      "X-MQ-Trace-Id": "abc-123",
      "x-mq-tenant": "acme",
      "X-Other": "not stored",
      "content-type": "text/plain",
    });
    const msg = await consume(ctx, "hdr");
    assertEquals(msg.headers, { "x-mq-trace-id": "abc-123", "x-mq-tenant": "acme" });
  });
});

Deno.test("POST /publish?broadcast=true reaches every parked consumer and is never stored", async () => {
  await withBroker({}, async (ctx) => {
    const c1 = ctx.start("GET", "/consume/news?timeout=5s");
    const c2 = ctx.start("GET", "/consume/news?timeout=5s");
    await settle(ctx.url);
    const res = await ctx.call("POST", "/publish/news?broadcast=true", { body: "flash" });
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body, { broadcast: true, delivered_to: 2 });
    for (const r of await Promise.all([c1, c2])) {
      assertEquals(r.status, 200, r.text);
      assertEquals(textOf(r.body), "flash");
    }
    await assertEmpty(ctx, "news");

    const none = await ctx.call("POST", "/publish/news?broadcast=true", { body: "nobody" });
    assertEquals(none.status, 200, none.text);
    assertEquals(none.body, { broadcast: true, delivered_to: 0 });
    await assertEmpty(ctx, "news");
  });
});

Deno.test("POST /publish?broadcast=true leaves nothing behind across a restart", async () => {
  const clock = new Clock();
  const first = await startBroker({}, { clock: clock.fn });
  const dataDir = first.dataDir;
  let firstOpen = true;
  let second;
  try {
    const ctx1 = bind(first, clock);
    await publish(ctx1, "bc", "stored"); // the topic exists on disk
    await consume(ctx1, "bc", "auto_ack=true");
    const res = await ctx1.call("POST", "/publish/bc?broadcast=true", { body: "ephemeral" });
    assertEquals(res.status, 200, res.text);
    firstOpen = false;
    await first.close({ keepData: true });
    second = await startBroker({ dataDir }, { clock: clock.fn });
    await assertEmpty(bind(second, clock), "bc");
  } finally {
    if (firstOpen) await first.close({ keepData: true });
    if (second) await second.close();
    else await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
});

Deno.test("POST /publish past maxQueue with policy reject is 429 queue_full with Retry-After", async () => {
  await withBroker({ maxQueue: 3 }, async (ctx) => {
    for (let i = 0; i < 3; i++) await publish(ctx, "full", `m${i}`);
    const res = await ctx.call("POST", "/publish/full", { body: "m3" });
    assertProblem(res, 429, "queue_full");
    assertMatch(res.headers.get("retry-after") ?? "", /^\d+$/);
    const all = await consume(ctx, "full", "limit=10&auto_ack=true");
    assertEquals(all.map(textOf), ["m0", "m1", "m2"]);
    await publish(ctx, "full", "m4"); // room again once drained
  });
});

Deno.test("POST /publish past maxQueue with policy drop-oldest drops the oldest", async () => {
  await withBroker({ maxQueue: 3 }, async (ctx) => {
    const t = await ctx.call("POST", "/api/topics", {
      json: { name: "drop", policy: "drop-oldest" },
    });
    assertEquals(t.status, 201, t.text);
    assertEquals(t.body.policy, "drop-oldest");
    for (let i = 0; i < 5; i++) await publish(ctx, "drop", `m${i}`);
    const all = await consume(ctx, "drop", "limit=10");
    assertEquals(all.map(textOf), ["m2", "m3", "m4"]);
  });
});

Deno.test("POST /publish to a topic with retain gets that ttl", async () => {
  await withBroker({}, async (ctx) => {
    const t = await ctx.call("POST", "/api/topics", { json: { name: "kept", retain: "10s" } });
    assertEquals(t.status, 201, t.text);
    assertEquals(t.body.retain, "10s");
    const p = await publish(ctx, "kept", "r");
    assertEquals(Date.parse(p.expires_at) - Date.parse(p.timestamp), 10_000);
    await ctx.tick(9_000);
    const peeked = await consume(ctx, "kept", "peek=true");
    assertEquals(textOf(peeked), "r");
    await ctx.tick(2_000);
    await assertEmpty(ctx, "kept");
  });
});

/**
 * Sends a publish's headers, with a body of `declared` bytes that never comes, and resolves with
 * the answer's first line and body: a refusal must not wait for the body.
 */
async function answerBeforeBody(url: string, path: string, headers: string, declared: number) {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: Number(new URL(url).port) });
  try {
    await conn.write(
      new TextEncoder().encode(
        `POST ${path} HTTP/1.1\r\nHost: localhost\r\n${headers}Content-Length: ${declared}\r\n\r\n`,
      ),
    );
    const buf = new Uint8Array(4096);
    const n = await within(conn.read(buf), 5_000, `an answer to ${path} before its body`);
    const text = new TextDecoder().decode(buf.subarray(0, n ?? 0));
    return {
      status: text.slice(0, text.indexOf("\r\n")),
      body: text.slice(text.indexOf("\r\n\r\n") + 4),
    };
  } finally {
    conn.close();
  }
}

Deno.test("a key past its publish limit is refused 429 before the broker reads its body", async () => {
  const key = "slow-aaaaaaaaaaaaaaaaaaaa";
  await withBroker({ apiKeys: `${key}:publish name=slow rate=1/s` }, async (ctx) => {
    // A batch of 30 is admitted as one message, then charged the other 29: 29 s in debt.
    const batch = await ctx.call("POST", "/publish/rl/batch", {
      json: Array.from({ length: 30 }, (_, i) => ({ payload_text: `m${i}` })),
      headers: { "x-api-key": key },
    });
    assertEquals(batch.status, 201, batch.text);
    const held = ctx.broker.memory.held;
    for (const path of ["/publish/rl", "/publish/rl/batch", "/api/queues/publish"]) {
      const res = await answerBeforeBody(ctx.url, path, `X-API-Key: ${key}\r\n`, 1_000_000);
      assertEquals(res.status, "HTTP/1.1 429 Too Many Requests", res.body);
      assertEquals(JSON.parse(res.body).code, "rate_limited");
      assertMatch(JSON.parse(res.body).detail, /"slow"/);
    }
    assertEquals(ctx.broker.memory.held, held, "nothing of the refused bodies is held");
  });
});
