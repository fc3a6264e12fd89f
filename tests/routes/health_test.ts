/**
 * /healthz, POST /api/drain, and the headers every answer carries, through the HTTP server.
 */

import { assert, assertEquals, assertMatch, Failures } from "../_support/assert.ts";
import { assertProblem, type CallInit, publish, type Res, settle } from "../_support/http.ts";
import { withBroker } from "../_support/server.ts";
import { Broker } from "../../lib/broker.ts";
import { ClusterState } from "../../lib/cluster/state.ts";
import { defaultConfig } from "../../lib/config.ts";
import { Logger } from "../../lib/log.ts";
import { createHandler } from "../../routes/app.ts";

Deno.test("GET /healthz answers 200 {status:ok, version, uptime_seconds} without cluster fields", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("GET", "/healthz");
    assertEquals(res.status, 200, res.text);
    assertMatch(res.headers.get("content-type") ?? "", /^application\/json/);
    assertEquals(res.body.status, "ok");
    assertEquals(typeof res.body.version, "string");
    assert(res.body.version.length > 0);
    assert(Number.isInteger(res.body.uptime_seconds), res.text);
    assert(res.body.uptime_seconds >= 0);
    assertEquals("cluster_role" in res.body, false);
    assertEquals("cluster_term" in res.body, false);
    assert(res.headers.get("x-request-id"));
  });
});

Deno.test("POST /api/drain answers {status:draining,in_flight_requests}", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("POST", "/api/drain");
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body.status, "draining");
    assert(Number.isInteger(res.body.in_flight_requests), res.text);
    assert(res.body.in_flight_requests >= 0);
  });
});

Deno.test("POST /api/drain counts a parked long-poll as in flight", async () => {
  await withBroker({}, async (ctx) => {
    const parked = ctx.start("GET", "/consume/dr?timeout=5s");
    await settle(ctx.url);
    const res = await ctx.call("POST", "/api/drain");
    assertEquals(res.status, 200, res.text);
    assert(res.body.in_flight_requests >= 1, res.text);
    await ctx.tick(5_000);
    const r = await parked; // whatever the drain does to it, it is answered
    assert([404, 503].includes(r.status), `${r.status} ${r.text}`);
  });
});

Deno.test("after POST /api/drain every request is 503 draining with Retry-After", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "d", "x");
    assertEquals((await ctx.call("POST", "/api/drain")).status, 200);

    const health = await ctx.call("GET", "/healthz");
    assertEquals(health.status, 503, health.text);
    assert(health.headers.get("x-request-id"));

    const calls: [string, string, CallInit?][] = [
      ["POST", "/publish/d", { body: "y" }],
      ["GET", "/consume/d"],
      ["POST", "/ack/d/01890000-0000-7000-8000-000000000000"],
      ["GET", "/api/queues"],
      ["POST", "/api/topics", { body: '{"name":"n"}' }],
      ["GET", "/api/groups?topic=d"],
      ["POST", "/api/drain"],
      ["GET", "/no/such/route"],
      ["PUT", "/publish/d", { body: "y" }],
      ["DELETE", "/api/queues/purge?queue=d"],
    ];
    const bad = new Failures();
    for (const [method, path, init] of calls) {
      const res = await ctx.call(method, path, init);
      bad.check(`${method} ${path}`, () => {
        assertProblem(res, 503, "draining");
        assertMatch(res.headers.get("retry-after") ?? "", /^\d+$/, "Retry-After");
      });
    }
    bad.assertNone();
  });
});

Deno.test("a draining standalone broker says to retry once it has restarted; a cluster node, on another node", async () => {
  const broker = await Broker.open(defaultConfig({ dataDir: ":memory:" }), { tick: false });
  try {
    const handle = createHandler(broker);
    const detail = async () => {
      const res = await handle(new Request("http://ferry/api/stats"));
      assertEquals(res.status, 503);
      return (await res.json()).detail;
    };
    await broker.drain();
    assertEquals(
      await detail(),
      "The broker is draining (stopping); retry once it has restarted",
    );
    broker.cluster = new ClusterState("n1", "http://n1", new Logger("error", () => {}));
    assertEquals(await detail(), "The broker is draining; retry on another node");
  } finally {
    broker.cluster = undefined;
    await broker.close();
  }
});

Deno.test("every answer carries X-Request-Id, success or error", async () => {
  await withBroker({}, async (ctx) => {
    const p = await ctx.call("POST", "/publish/rid", { body: "x" });
    const all: Res[] = [p];
    all.push(await ctx.call("GET", "/consume/rid"));
    all.push(await ctx.call("POST", `/ack/rid/${p.body.id}`));
    all.push(await ctx.call("GET", "/consume/rid"));
    all.push(await ctx.call("GET", "/healthz"));
    all.push(await ctx.call("GET", "/api/queues"));
    all.push(await ctx.call("GET", "/nowhere"));
    all.push(await ctx.call("GET", "/publish/rid"));
    all.push(await ctx.call("POST", "/publish/rid"));
    all.push(await ctx.call("POST", "/publish/bad%20name", { body: "x" }));
    const ids = all.map((r) => r.headers.get("x-request-id"));
    for (const [i, id] of ids.entries()) assert(id, `answer ${i} (${all[i]!.status}) lacks it`);
    assertEquals(new Set(ids).size, ids.length, "request ids are unique");
    // An error's body names the same request.
    for (const r of all.filter((r) => r.status >= 400)) {
      assertEquals(r.body.request_id, r.headers.get("x-request-id"));
    }
  });
});
