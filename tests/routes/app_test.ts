/**
 * routes/app.ts through the HTTP server: requests whose URL cannot be read, HEAD on routes that
 * change state, and the one error path that always answers a problem body with X-Request-Id.
 */

import { assert, assertEquals, assertMatch } from "../_support/assert.ts";
import {
  assertEmpty,
  assertProblem,
  assertRawProblem,
  consume,
  publish,
  rawRequest,
} from "../_support/http.ts";
import { withBroker } from "../_support/server.ts";

/** A Host header fetch would never send; the runtime hands such requests to the handler. */
const BAD_HOSTS = ["@", "a@b@c", "[::1", "exa mple", "%00", ":::::", "a:99999999"];

Deno.test("a Host header that is not an authority never gets a 500, on any route", async () => {
  // Any Host is answered here, so the routes see these (on loopback site_policy refuses them).
  await withBroker({ allowedHosts: ["*"] }, async (ctx) => {
    await publish(ctx, "h", "x");
    const paths = ["/api/cluster/status", "/healthz", "/consume/h?peek=true", "/nowhere"];
    for (const host of BAD_HOSTS) {
      for (const path of paths) {
        const res = await rawRequest(
          ctx.url,
          `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
        );
        if (res.status === 400 && !res.headers.has("x-request-id")) continue; // the runtime's
        const what = `Host: ${host} GET ${path} -> ${res.status} ${res.body}`;
        assert(res.status < 500, what);
        assert(res.headers.get("x-request-id"), what);
        if (res.status >= 400) {
          assertMatch(res.headers.get("content-type") ?? "", /problem\+json/, what);
        }
      }
    }
    const status = await rawRequest(
      ctx.url,
      "GET /api/cluster/status HTTP/1.1\r\nHost: @\r\nConnection: close\r\n\r\n",
    );
    assertEquals(status.status, 200, status.body);
    assertEquals(
      JSON.parse(status.body).leader,
      null,
      "a bad Host is not shown as the leader",
    );
  });
});

Deno.test("HEAD /consume is 405 with Allow: GET and takes nothing, even with auto_ack", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "hd", "keep me");
    for (const q of ["auto_ack=true", "", "limit=10&auto_ack=1"]) {
      const res = await ctx.call("HEAD", `/consume/hd?${q}`);
      assertEquals(res.status, 405, `HEAD /consume/hd?${q}`);
      assertEquals(res.headers.get("allow"), "GET");
    }
    assertEquals((await consume(ctx, "hd", "auto_ack=true")).payload_text, "keep me");
    await assertEmpty(ctx, "hd");
  });
});

Deno.test("HEAD works on the GET routes that only read", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "rd", "x");
    for (const path of ["/healthz", "/api/queues", "/api/stats", "/api/queues/peek?queue=rd"]) {
      const res = await ctx.call("HEAD", path);
      assertEquals(res.status, 200, `HEAD ${path}`);
      assertEquals(res.text, "", `HEAD ${path} has no body`);
    }
    assertEquals((await consume(ctx, "rd")).payload_text, "x");
  });
});

Deno.test("an unknown route with a huge path answers a bounded problem detail", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("GET", `/${"p".repeat(20_000)}`);
    assertProblem(res, 404, "not_found");
    assert(res.body.detail.length < 400, `detail of ${res.body.detail.length} characters`);
  });
});

Deno.test("a problem answer from the runtime-facing error path carries X-Request-Id", async () => {
  await withBroker({ allowedHosts: ["*"] }, async (ctx) => {
    const res = await rawRequest(
      ctx.url,
      "POST /publish/x HTTP/1.1\r\nHost: @\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assertRawProblem(res, 400, "empty_body");
  });
});
