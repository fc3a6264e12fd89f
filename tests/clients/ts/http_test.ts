/**
 * The client's transport against real brokers: problem answers as FerryErrors, API keys, the
 * timeout and connection errors as their own kinds, and the retry rules under real conditions:
 * a drained broker restarted behind the same address, a full topic, connections that break
 * before or after the broker acted, and a 307 to another node.
 */

import { counting } from "../../_support/http.ts";
import { assert, assertEquals, assertMatch } from "../../_support/assert.ts";
import { settle } from "../../_support/http.ts";
import { startProxy } from "../../_support/proxy.ts";
import { startRestartable } from "../../_support/restartable.ts";
import { withBroker } from "../../_support/server.ts";
import {
  Ferry,
  FerryConnectionError,
  FerryError,
  FerryTimeoutError,
  type RetryInfo,
} from "../../../clients/ts/mod.ts";

/** A loopback port nothing listens on. */
function closedPort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

Deno.test("a 4xx answer is a FerryError with the problem's fields, sent once", async () => {
  await withBroker({}, async (ctx) => {
    const c = counting();
    const ferry = new Ferry({ url: ctx.url, fetch: c.fetch });
    const e = await ferry.publish("bad name!", "x").catch((e) => e);
    assert(e instanceof FerryError && !(e instanceof FerryConnectionError), String(e));
    assertEquals([e.status, e.code, e.name], [400, "invalid_name", "FerryError"]);
    assertMatch(e.detail, /bad name!/);
    assertMatch(e.requestId ?? "", /^[0-9a-f-]{36}$/, "the id the client sent, echoed");
    assertEquals(c.n, 1, "a refusal that waiting cannot mend is not retried");
  });
});

Deno.test("API keys: none is 401, one without the scope 403, the right one passes on every route kind", async () => {
  await withBroker({ apiKeys: "root,pub-only:publish" }, async (ctx) => {
    const anon = await new Ferry({ url: ctx.url }).publish("k", "x").catch((e) => e);
    assert(anon instanceof FerryError);
    assertEquals([anon.status, anon.code], [401, "unauthorized"]);
    const pub = new Ferry({ url: ctx.url, apiKey: "pub-only" });
    await pub.publish("k", "x");
    const denied = await pub.consume("k").catch((e) => e);
    assert(denied instanceof FerryError);
    assertEquals([denied.status, denied.code], [403, "forbidden"]);
    const wrong = await new Ferry({ url: ctx.url, apiKey: "nope" }).stats().catch((e) => e);
    assertEquals((wrong as FerryError).status, 401);

    const root = new Ferry({ url: ctx.url, apiKey: "root" });
    assertEquals((await root.consume("k")).map((m) => m.payload_text), ["x"]);
    const sub = root.subscribe("k", () => {}); // the key rides in ?api_key=
    await sub.ready;
    await sub.close();
    const ac = new AbortController();
    const heard = (async () => {
      for await (const m of root.stream("k", { signal: ac.signal })) return m.payload_text;
    })();
    await root.publish("k", "streamed");
    assertEquals(await heard, "streamed");
    const refused = (async () => {
      for await (const _ of pub.stream("k")) return "heard";
    })();
    const e = await refused.catch((e) => e);
    assertEquals([(e as FerryError).status, (e as FerryError).code], [403, "forbidden"]);
  });
});

Deno.test("a request longer than timeoutMs is a FerryTimeoutError, not retried", async () => {
  await withBroker({}, async (ctx) => {
    const c = counting();
    const ferry = new Ferry({ url: ctx.url, timeoutMs: 200, fetch: c.fetch });
    const t0 = performance.now();
    const e = await ferry.consume("empty", { timeout: "10s" }).catch((e) => e);
    const ms = performance.now() - t0;
    assert(e instanceof FerryTimeoutError && e instanceof FerryError, String(e));
    assertEquals([e.status, e.code], [0, "timeout"]);
    assertMatch(e.message, /No answer within 200 ms/);
    assertMatch(e.requestId ?? "", /^[0-9a-f-]{36}$/);
    assert(ms >= 190 && ms < 2_000, `timed out after ${ms} ms`);
    assertEquals(c.n, 1);
    // A call's own deadline wins over the client's.
    const longer = ferry.consume("empty", { timeout: "1s", timeoutMs: 5_000 });
    await settle(ctx);
    await ctx.tick(1_000); // the broker's clock ends the long poll
    assertEquals(await longer, []);
  });
});

Deno.test("no broker: FerryConnectionError after an idempotent call's retries; a publish without a key is tried once", async () => {
  const url = `http://127.0.0.1:${closedPort()}`;
  const retries: RetryInfo[] = [];
  const ferry = new Ferry({ url, retryDelayMs: 5, onRetry: (r) => retries.push(r) });
  const e = await ferry.stats().catch((e) => e);
  assert(e instanceof FerryConnectionError, String(e));
  assertEquals([e.status, e.code, e.name], [0, "connection_failed", "FerryConnectionError"]);
  assertMatch(e.detail, new RegExp(`Cannot reach ${url}`));
  assertEquals(retries.map((r) => [r.action, r.attempt]), [
    ["GET /api/stats", 1],
    ["GET /api/stats", 2],
    ["GET /api/stats", 3],
  ]);
  retries.length = 0;
  const p = await ferry.publish("t", "x").catch((e) => e);
  assert(p instanceof FerryConnectionError);
  assertEquals(retries, [], "it may have been stored: not sent again");
  const keyed = await ferry.publish("t", "x", { idempotencyKey: "auto" }).catch((e) => e);
  assert(keyed instanceof FerryConnectionError);
  assertEquals(retries.length, 3, "with a key it is retried");
});

Deno.test("a 503 from a drained broker is retried after Retry-After, and the broker restarted behind the same address answers", async () => {
  const r = await startRestartable();
  try {
    let restarted: Promise<void> | undefined;
    const ferry = new Ferry({
      url: r.url,
      onRetry: (info) => {
        assertEquals([info.error.status, info.error.code, info.delayMs], [503, "draining", 1_000]);
        restarted ??= r.restart(); // a rolling restart: the drained broker goes, a new one opens its data dir
      },
    });
    await ferry.publish("kept", "before the restart");
    await ferry.drain();
    const stats = await ferry.stats();
    assertEquals(stats.topics.kept?.depth, 1, "the new broker recovered the topic");
    assert(restarted, "the retry waited for the restart");
    await restarted;
  } finally {
    await r.close();
  }
});

Deno.test("a 429 queue_full publish is retried after Retry-After and lands once a consumer makes room", async () => {
  await withBroker({ maxQueue: 1 }, async (ctx) => {
    const helper = new Ferry({ url: ctx.url });
    const heard: string[] = [];
    const ferry = new Ferry({
      url: ctx.url,
      onRetry: async (r) => {
        heard.push(`${r.error.status} ${r.error.code}`);
        const [m] = await helper.consume("full");
        await helper.ack("full", m!.id);
      },
    });
    await ferry.publish("full", "first");
    const second = await ferry.publish("full", "second");
    assertEquals([second.deduplicated, heard], [false, ["429 queue_full"]]);
    assertEquals((await helper.consume("full")).map((m) => m.payload_text), ["second"]);
  });
});

Deno.test("an answer lost after the broker stored a publish: an auto key makes the retry a dedupe, not a duplicate", async () => {
  await withBroker({}, async (ctx) => {
    const proxy = startProxy(ctx.url);
    try {
      const ferry = new Ferry({ url: proxy.url, idempotencyKey: "auto", retryDelayMs: 5 });
      proxy.loseAnswers = 1;
      const p = await ferry.publish("once", "payment 17");
      assertEquals(p.deduplicated, true, "the retry found the first attempt's message");
      assertEquals((await ferry.consume("once", { limit: 10 })).map((m) => m.id), [p.id]);

      const plain = new Ferry({ url: proxy.url, retryDelayMs: 5 });
      proxy.cut();
      proxy.loseAnswers = 1;
      const e = await plain.publish("twice", "payment 18").catch((e) => e);
      assert(e instanceof FerryConnectionError, "no key: not retried, the caller decides");
      assertEquals((await plain.consume("twice")).length, 1, "yet the broker had stored it");
      await plain.publish("acks", "a");
      const [a] = await plain.consume("acks");
      proxy.cut();
      proxy.loseAnswers = 1;
      await plain.ack("acks", a!.id); // the lost attempt acked it: the retry's 404 means done
      assertEquals((await plain.stats()).topics.acks?.in_flight, 0);
    } finally {
      await proxy.close();
    }
  });
});

Deno.test("a 307 to another node is followed with the body and the API key", async () => {
  await withBroker({ apiKeys: "k" }, async (ctx) => {
    // A follower sends every write to the leader with 307 (docs/cluster.md), and lists the
    // leader in its cluster status, which tells the client the key may go there.
    const follower = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
      const u = new URL(req.url);
      if (u.pathname === "/api/cluster/status") {
        return Response.json({ mode: "cluster", role: "follower", leader: ctx.url, peers: [] });
      }
      return new Response(null, {
        status: 307,
        headers: { location: ctx.url + u.pathname + u.search },
      });
    });
    try {
      const ferry = new Ferry({ url: `http://127.0.0.1:${follower.addr.port}`, apiKey: "k" });
      const bytes = new Uint8Array(100_000).map((_, i) => i % 251);
      const p = await ferry.publish("moved", bytes, { priority: "high", headers: { a: "b" } });
      const [m] = await ferry.consume("moved");
      assertEquals([m!.id, m!.priority, m!.headers], [p.id, "high", { "x-mq-a": "b" }]);
      assertEquals(atob(m!.payload).length, 100_000);
      await ferry.ack("moved", m!.id);
      assertEquals((await ferry.stats()).topics.moved?.in_flight, 0);
    } finally {
      await follower.shutdown();
    }
  });
});

Deno.test("the caller's AbortSignal ends a call with its reason", async () => {
  await withBroker({}, async (ctx) => {
    const ferry = new Ferry({ url: ctx.url });
    const ac = new AbortController();
    const parked = ferry.consume("idle", { timeout: "20s", signal: ac.signal });
    const why = new Error("shutting down");
    ac.abort(why);
    assertEquals(await parked.catch((e) => e), why);
  });
});
