/**
 * GET /stream/{topic} through the HTTP server: a real EventSource, resume with Last-Event-ID,
 * filters, broadcasts, topics that do not exist yet, slow readers, pings and drain.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import { call, publish } from "../_support/http.ts";
import { startBroker, withBroker } from "../_support/server.ts";
import { openSse } from "../_support/sse.ts";
import { spawnBroker } from "../_support/child.ts";
import { createHandler } from "../../routes/app.ts";
import { streamRoutes } from "../../routes/sse.ts";

/** The events a real EventSource hears, and a way to wait for the n-th. */
function listen(url: string) {
  const es = new EventSource(url);
  const got: MessageEvent[] = [];
  const waiting: { n: number; resolve: () => void }[] = [];
  es.onmessage = (e) => {
    got.push(e);
    for (const w of waiting.splice(0)) (got.length >= w.n ? w.resolve : () => waiting.push(w))();
  };
  const opened = new Promise<void>((resolve, reject) => {
    es.onopen = () => resolve();
    es.onerror = () => reject(new Error("EventSource failed to open"));
  });
  return {
    es,
    got,
    opened,
    heard: (n: number) =>
      got.length >= n
        ? Promise.resolve()
        : new Promise<void>((resolve) => waiting.push({ n, resolve })),
  };
}

Deno.test("GET /stream with a real EventSource hears stored messages with their sequence numbers, and broadcasts", async () => {
  await withBroker({}, async (ctx) => {
    const s = listen(`${ctx.url}/stream/orders`);
    await s.opened;
    const a = await publish(ctx, "orders", "first", "", { "x-mq-trace": "t-1" });
    await publish(ctx, "orders", "second");
    const b = await ctx.call("POST", "/publish/orders?broadcast=true", { body: "flash" });
    assertEquals(b.body.delivered_to, 1, "the stream is a live subscriber");
    await s.heard(3);
    s.es.close();
    const msgs = s.got.map((e) => JSON.parse(e.data));
    assertEquals(msgs.map((m) => m.payload_text), ["first", "second", "flash"]);
    assertEquals([msgs[0].id, msgs[0].topic, msgs[0].headers], [a.id, "orders", {
      "x-mq-trace": "t-1",
    }]);
    const [id1, id2] = [Number(s.got[0]!.lastEventId), Number(s.got[1]!.lastEventId)];
    assert(id1 > 0 && id2 > id1, `ids ${id1}, ${id2}`);
    // Nothing was consumed: the messages are still there for consumers.
    assertEquals((await ctx.call("GET", "/consume/orders?limit=10")).body.length, 2);
  });
});

Deno.test("GET /stream answers as an event stream and 400s a bad filter or name", async () => {
  await withBroker({}, async (ctx) => {
    const s = await openSse(`${ctx.url}/stream/orders`);
    assertEquals(s.status, 200);
    assertEquals(s.headers.get("content-type"), "text/event-stream");
    assertEquals(s.headers.get("cache-control"), "no-cache");
    await s.close();
    assertEquals((await ctx.call("GET", "/stream/orders?filter_val=x")).status, 400);
    assertEquals((await ctx.call("GET", "/stream/..bad")).status, 400);
  });
});

Deno.test("GET /stream with filter_key/filter_val hears only matching messages", async () => {
  await withBroker({}, async (ctx) => {
    const s = await openSse(`${ctx.url}/stream/orders?filter_key=kind&filter_val=paid`);
    await publish(ctx, "orders", JSON.stringify({ kind: "new" }));
    await publish(ctx, "orders", "not json");
    await publish(ctx, "orders", JSON.stringify({ kind: "paid", n: 1 }));
    const [e] = await s.take(1);
    assertEquals(JSON.parse(e!.data!).payload_text, JSON.stringify({ kind: "paid", n: 1 }));
    await s.close();
  });
});

Deno.test("GET /stream of a topic that does not exist yet waits for its first message", async () => {
  await withBroker({}, async (ctx) => {
    const s = await openSse(`${ctx.url}/stream/later`);
    await publish(ctx, "later", "hello");
    const [e] = await s.take(1);
    assertEquals(JSON.parse(e!.data!).payload_text, "hello");
    await s.close();
  });
});

Deno.test("GET /stream with Last-Event-ID resumes from the ring or from what the topic holds; event: reset first for what left", async () => {
  await withBroker({ streamBuffer: 3 }, async (ctx) => {
    const first = await openSse(`${ctx.url}/stream/jobs`); // the topic is streamed: its ring fills
    for (const p of ["1", "2", "3", "4", "5"]) await publish(ctx, "jobs", p);
    const seen = await first.take(5);
    await first.close();
    const id = (i: number) => seen[i]!.id!;

    const resumed = await openSse(`${ctx.url}/stream/jobs`, { "last-event-id": id(2) });
    const missed = await resumed.take(2);
    assertEquals(missed.map((e) => [e.id, JSON.parse(e.data!).payload_text]), [[id(3), "4"], [
      id(4),
      "5",
    ]]);
    await resumed.close();

    // The ring no longer holds message 2, but the topic does.
    const held = await openSse(`${ctx.url}/stream/jobs`, { "last-event-id": id(0) });
    const all = await held.take(4);
    assertEquals(all.map((e) => [e.event, e.id]), [2, 3, 4, 5].map((i) => [undefined, id(i - 1)]));
    await held.close();

    const [, two] = (await ctx.call("GET", "/consume/jobs?limit=2")).body;
    assertEquals(two.payload_text, "2");
    assertEquals((await ctx.call("POST", `/ack/jobs/${two.id}`)).status, 204); // "2" left
    const late = await openSse(`${ctx.url}/stream/jobs`, { "last-event-id": id(0) });
    const [reset, ...rest] = await late.take(4);
    assertEquals(reset!.event, "reset", "message 2 left the topic");
    assertEquals(JSON.parse(reset!.data!).missed, 1);
    assertEquals(rest.map((e) => JSON.parse(e.data!).payload_text), ["3", "4", "5"]);
    await publish(ctx, "jobs", "6");
    const [live] = await late.take(1);
    assertEquals(JSON.parse(live!.data!).payload_text, "6");
    await late.close();
  });
});

Deno.test("GET /stream: a reader that falls behind gets event: reset and the stream ends", async () => {
  await withBroker({ streamBuffer: 8 }, async (ctx) => {
    const slow = await openSse(`${ctx.url}/stream/big`);
    const payload = "x".repeat(60 * 1024); // ~140 KB per event once Base64 and text are in
    for (let i = 0; i < 200; i++) await publish(ctx, "big", payload);
    let last, events = 0;
    for (let e = await slow.next(); e; e = await slow.next()) {
      if (e.comment === undefined) events++;
      last = e;
    }
    assertEquals(last?.event, "reset", "the last event tells the reader it missed data");
    assert(events < 201, `${events} events: some were never sent`);
    assertEquals(ctx.broker.feed.count("big"), 0, "the subscription is gone");
    await slow.close();
  });
});

Deno.test("GET /stream sends ': ping' comments while idle", async () => {
  const b = await startBroker({});
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    createHandler(b.broker, { routes: streamRoutes({ pingMs: 20 }) }),
  );
  try {
    const s = await openSse(`http://127.0.0.1:${server.addr.port}/stream/quiet`);
    const e = await s.next();
    assertEquals(e?.comment, "ping");
    await s.close();
  } finally {
    await server.shutdown();
    await b.close();
  }
});

Deno.test("POST /api/drain ends every stream with event: shutdown", async () => {
  await withBroker({}, async (ctx) => {
    const s = await openSse(`${ctx.url}/stream/orders`);
    await publish(ctx, "orders", "a");
    await s.take(1);
    assertEquals((await call(ctx, "POST", "/api/drain")).status, 200);
    const [shutdown] = await s.take(1);
    assertEquals(shutdown, { event: "shutdown", data: '{"reason":"the broker is stopping"}' });
    let e = await s.next();
    while (e?.comment !== undefined) e = await s.next();
    assertEquals(e, undefined, "then the stream ended");
    await s.close();
  });
});

Deno.test("GET /metrics counts live streams in ferry_stream_subscribers", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "orders", "exists");
    const gauge = async () =>
      /ferry_stream_subscribers\{topic="orders"\} (\d+)/.exec(
        (await ctx.call("GET", "/metrics")).text,
      )?.[1];
    assertEquals(await gauge(), "0");
    const a = await openSse(`${ctx.url}/stream/orders`);
    const b = await openSse(`${ctx.url}/stream/orders`);
    assertEquals(await gauge(), "2");
    await a.close();
    await b.close();
  });
});

Deno.test({
  name: "SIGTERM ends every stream with event: shutdown and the broker exits 0",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const dataDir = await Deno.makeTempDir({ prefix: "ferry-stream-" });
    const child = await spawnBroker({ dataDir });
    try {
      const s = await openSse(`${child.url}/stream/orders`);
      await publish(child, "orders", "a");
      await s.take(1);
      child.kill("SIGTERM");
      const [shutdown] = await s.take(1);
      assertEquals(shutdown?.event, "shutdown");
      assertEquals(JSON.parse(shutdown!.data!), { reason: "the broker is stopping" });
      let e = await s.next();
      while (e?.comment !== undefined) e = await s.next();
      assertEquals(e, undefined, "then the stream ended");
      assertEquals((await child.exited).code, 0);
      await s.close();
    } finally {
      child.kill("SIGKILL");
      await child.exited;
      await Deno.remove(dataDir, { recursive: true });
    }
  },
});
