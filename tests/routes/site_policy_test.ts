/**
 * routes/site_policy.ts through the HTTP server: a cross-site page cannot change state (publish,
 * webhooks, drain, consume, WebSocket), same-origin and Origin-less clients can, and a broker on
 * loopback answers only loopback hosts and BROKER_ALLOWED_HOSTS (DNS rebinding). Also with
 * BROKER_WORKERS=2, as a process.
 */

import { assert, assertEquals, assertMatch, assertThrows } from "../_support/assert.ts";
import { assertProblem, assertRawProblem, call, rawRequest, type Res } from "../_support/http.ts";
import { withBroker } from "../_support/server.ts";
import { start, stop, withDataDir } from "../_support/child.ts";
import { loadConfig } from "../../lib/config.ts";

const EVIL = "https://evil.example";
/** What a page's `fetch(..., {mode: "no-cors"})` or `<form>` sends: no preflight. */
const simple = (origin: string, body?: string) => ({
  body,
  headers: { origin, "content-type": "text/plain;charset=UTF-8" },
});

function assertRefused(res: Res, what: string): void {
  assertProblem(res, 403, "forbidden");
  assertMatch(res.body.detail, /BROKER_ALLOWED_ORIGINS/, what);
}

Deno.test("a cross-site page cannot publish, register a webhook, create a topic or drain", async () => {
  await withBroker({}, async (ctx) => {
    const hook = JSON.stringify({ url: "http://127.0.0.1:9/exfil" });
    assertRefused(await ctx.call("POST", "/publish/csrf", simple(EVIL, "x")), "publish");
    assertRefused(await ctx.call("POST", "/publish/csrf/batch", simple(EVIL, "[]")), "batch");
    assertRefused(await ctx.call("POST", "/webhook/csrf", simple(EVIL, hook)), "webhook");
    const topic = simple(EVIL, '{"name":"csrf-topic"}');
    assertRefused(await ctx.call("POST", "/api/topics", topic), "topic");
    assertRefused(await ctx.call("POST", "/api/drain", simple(EVIL)), "drain");
    // A sandboxed frame or a redirect sends Origin: null.
    assertRefused(await ctx.call("POST", "/api/drain", simple("null")), "drain from null");
    const detail = (await ctx.call("POST", "/api/drain", simple(EVIL))).body.detail;
    assertMatch(detail, /^Cannot POST \/api\/drain from origin "https:\/\/evil\.example"/);
    assertEquals((await ctx.call("GET", "/healthz")).status, 200, "not draining");
    assertEquals((await ctx.call("GET", "/api/webhooks")).body, []);
    assertEquals((await ctx.call("GET", "/api/queues")).body, []);
  });
});

Deno.test("Sec-Fetch-Site cross-site or same-site without Origin cannot consume; reads are answered", async () => {
  await withBroker({}, async (ctx) => {
    assertEquals((await ctx.call("POST", "/publish/img", { body: "keep" })).status, 201);
    for (const site of ["cross-site", "same-site"]) {
      // An <img src=".../consume/img?auto_ack=true"> sends no Origin.
      const res = await ctx.call("GET", "/consume/img?auto_ack=true", {
        headers: { "sec-fetch-site": site },
      });
      assertProblem(res, 403, "forbidden");
      assertMatch(res.body.detail, new RegExp(`from a ${site} page without an Origin`));
    }
    const read = await ctx.call("GET", "/api/queues", {
      headers: { "sec-fetch-site": "cross-site" },
    });
    assertEquals(read.status, 200, "a browser cannot read the answer across sites anyway");
    const own = await ctx.call("GET", "/consume/img", {
      headers: { "sec-fetch-site": "same-origin" },
    });
    assertEquals(own.body.payload_text, "keep");
  });
});

Deno.test("same-origin pages, Origin-less clients and BROKER_ALLOWED_ORIGINS change state", async () => {
  const ops = "https://ops.example.com";
  await withBroker({ allowedOrigins: [ops] }, async (ctx) => {
    assertEquals((await ctx.call("POST", "/publish/ok", simple(ctx.url, "a"))).status, 201);
    assertEquals((await ctx.call("POST", "/publish/ok", { body: "b" })).status, 201, "curl");
    const listed = {
      ...simple(ops, "c"),
      headers: { ...simple(ops).headers, "sec-fetch-site": "cross-site" },
    };
    assertEquals((await ctx.call("POST", "/publish/ok", listed)).status, 201, "an allowed origin");
    // The dashboard's own page, with its Host spelt another way.
    const res = await rawRequest(
      ctx.url,
      `POST /publish/ok HTTP/1.1\r\nHost: LOCALHOST:${new URL(ctx.url).port}\r\n` +
        `Origin: http://localhost:${new URL(ctx.url).port}\r\nContent-Length: 1\r\n\r\nd`,
    );
    assertEquals(res.status, 201, res.body);
  });
});

Deno.test("a WebSocket opened by another origin is refused", async () => {
  await withBroker({}, async (ctx) => {
    const upgrade = (origin: string) =>
      rawRequest(
        ctx.url,
        "GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
          "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
          `Origin: ${origin}\r\n\r\n`,
      );
    assertRawProblem(await upgrade(EVIL), 403, "forbidden");
    const port = new URL(ctx.url).port;
    const own = new WebSocket(`ws://127.0.0.1:${port}/ws`); // Deno sends no Origin
    await new Promise((resolve, reject) => {
      own.onopen = resolve;
      own.onerror = reject;
    });
    own.close();
    await new Promise((resolve) => own.onclose = resolve);
  });
});

Deno.test("on loopback, a Host that is not loopback or listed is refused on every route", async () => {
  const get = (url: string, path: string, host: string) =>
    rawRequest(url, `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  await withBroker({ allowedHosts: ["ferry.internal"] }, async (ctx) => {
    const port = new URL(ctx.url).port;
    for (const path of ["/healthz", "/api/queues", "/dashboard/"]) {
      const res = await get(ctx.url, path, `attacker.example:${port}`);
      assertRawProblem(res, 403, "forbidden");
      assertMatch(JSON.parse(res.body).detail, /"attacker\.example:\d+".*BROKER_ALLOWED_HOSTS/);
    }
    for (
      const host of [
        "localhost",
        `localhost:${port}`,
        `127.0.0.1:${port}`,
        `[::1]:${port}`,
        "ferry.internal:80",
      ]
    ) {
      assertEquals((await get(ctx.url, "/api/queues", host)).status, 200, host);
    }
  });
});

Deno.test("beyond loopback with API keys off, a name not listed is refused; addresses are answered", async () => {
  const get = (url: string, host: string, headers = "") =>
    rawRequest(
      url,
      `GET /api/queues HTTP/1.1\r\nHost: ${host}\r\n${headers}Connection: close\r\n\r\n`,
    );
  // The policy of a broker bound to every interface (this one listens on 127.0.0.1 for the test).
  await withBroker({ host: "0.0.0.0", allowedHosts: ["broker.internal"] }, async (ctx) => {
    // A rebound page names its own host: refused, whatever the bind.
    const res = await get(ctx.url, "rebind.attacker.example:7800");
    assertRawProblem(res, 403, "forbidden");
    assertMatch(JSON.parse(res.body).detail, /its IP addresses.*BROKER_ALLOWED_HOSTS/);
    for (const host of ["192.0.2.10:7800", "[2001:db8::10]:7800", "localhost", "broker.internal"]) {
      assertEquals((await get(ctx.url, host)).status, 200, host);
    }
  });
  await withBroker({ host: "0.0.0.0" }, async (ctx) => {
    assertRawProblem(await get(ctx.url, "broker.example"), 403, "forbidden");
  });
  // With keys on, a rebound page cannot send the key: any name is answered unless listed ones.
  const key = "site-0123456789abcdef01";
  await withBroker({ host: "0.0.0.0", apiKeys: key }, async (ctx) => {
    assertEquals((await get(ctx.url, "broker.example", `X-API-Key: ${key}\r\n`)).status, 200);
  });
});

Deno.test("BROKER_ALLOWED_ORIGINS and BROKER_ALLOWED_HOSTS refuse values that are not origins or hosts", () => {
  assertEquals(
    loadConfig({ BROKER_ALLOWED_ORIGINS: "https://Ops.Example.com:443, http://a:8080/" })
      .allowedOrigins,
    ["https://ops.example.com", "http://a:8080"],
  );
  for (const v of ["ops.example.com", "https://ops.example.com/app", "ftp://x", "https://u:p@x"]) {
    assertMatch(
      assertThrows(() => loadConfig({ BROKER_ALLOWED_ORIGINS: v })).message,
      /BROKER_ALLOWED_ORIGINS/,
    );
  }
  assertEquals(loadConfig({ BROKER_ALLOWED_HOSTS: "Ferry.Internal,[fd00::5],*" }).allowedHosts, [
    "ferry.internal",
    "[fd00::5]",
    "*",
  ]);
  assertMatch(
    assertThrows(() => loadConfig({ BROKER_ALLOWED_HOSTS: "ferry.internal:7800" })).message,
    /BROKER_ALLOWED_HOSTS/,
  );
});

Deno.test("as a process with workers: cross-site writes and foreign Hosts are refused on every worker", async () => {
  await withDataDir(async (dir) => {
    const workers = Deno.env.get("BROKER_WORKERS") ?? "2";
    const b = await start(dir, { BROKER_WORKERS: workers });
    try {
      // Topics a to h land on both workers.
      for (const t of ["a", "b", "c", "d", "e", "f", "g", "h"]) {
        assertRefused(await call(b.url, "POST", `/publish/${t}`, simple(EVIL, "x")), t);
        assertEquals((await call(b.url, "POST", `/publish/${t}`, simple(b.url, "x"))).status, 201);
      }
      assertRefused(await call(b.url, "POST", "/api/drain", simple(EVIL)), "drain");
      const foreign = await rawRequest(
        b.url,
        `GET /api/queues HTTP/1.1\r\nHost: rebound.example:${b.port}\r\nConnection: close\r\n\r\n`,
      );
      assertRawProblem(foreign, 403, "forbidden");
      const health = await call(b.url, "GET", "/healthz");
      assertEquals(health.status, 200, health.text);
      const queues = (await call(b.url, "GET", "/api/queues")).body as { name: string }[];
      assertEquals(queues.length, 8);
    } finally {
      assert((await stop(b, "SIGTERM")).success);
    }
  });
});
