/** GET /api/stats, GET /api/cluster/status, GET /healthz, and their agreement with /metrics. */

import { assert, assertEquals, assertMatch } from "../_support/assert.ts";
import { call, type Json } from "../_support/http.ts";
import { parseMetrics, valueOf } from "../_support/metrics.ts";
import { busyState, startBroker, withBroker } from "../_support/server.ts";

Deno.test("GET /api/stats answers uptime, totals and per-topic, per-group figures", async () => {
  await withBroker({}, async (ctx) => {
    await busyState(ctx);
    const res = await ctx.call("GET", "/api/stats");
    assertEquals(res.status, 200, res.text);
    const s = res.body;
    assertEquals(Object.keys(s), ["uptime_seconds", "totals", "memory", "disk", "topics"]);
    assertEquals(s.uptime_seconds, 2);
    assertEquals(s.totals, {
      published: 9,
      delivered: 6,
      acked: 1,
      requeued: 3,
      dead_lettered: 1,
      expired: 1,
    });
    assertEquals(Object.keys(s.topics), ["jobs", "jobs.dlq", "orders", "temp"]);
    assertEquals(s.topics.orders, {
      depth: 3,
      in_flight: 1,
      delayed: 1,
      oldest_age_seconds: 2,
      held_bytes: s.topics.orders.held_bytes,
      groups: {
        "": { depth: 3, in_flight: 1, delayed: 1, oldest_age_seconds: 2 },
        billing: { depth: 4, in_flight: 1, delayed: 1, oldest_age_seconds: 2 },
      },
    });
    assert(s.topics.orders.held_bytes > 0);
    const held = Object.values(s.topics).reduce((n: number, t) => n + (t as Json).held_bytes, 0);
    assertEquals(Object.keys(s.memory), [
      "held_bytes",
      "budget_bytes",
      "drain_bytes_per_second",
    ]);
    assertEquals(s.memory.held_bytes, held);
    assertEquals(s.topics["jobs.dlq"].depth, 1);
    assertEquals(s.topics.temp.depth, 1);
  });
});

Deno.test("GET /api/stats totals keep what a deleted topic counted", async () => {
  await withBroker({}, async (ctx) => {
    await ctx.call("POST", "/publish/gone", { body: "x" });
    await ctx.call("POST", "/publish/stays", { body: "x" });
    assertEquals((await ctx.call("DELETE", "/api/queues/delete?queue=gone")).status, 200);
    const s = (await ctx.call("GET", "/api/stats")).body;
    assertEquals(s.totals.published, 2);
    assertEquals(Object.keys(s.topics), ["stays"]);
  });
});

Deno.test("/api/stats, /api/queues and /metrics agree on every topic and group", async () => {
  await withBroker({}, async (ctx) => {
    await busyState(ctx);
    const [stats, queues, text] = [
      (await ctx.call("GET", "/api/stats")).body,
      (await ctx.call("GET", "/api/queues")).body as Json[],
      (await ctx.call("GET", "/metrics")).text,
    ];
    const m = parseMetrics(text);
    assertEquals(queues.map((q) => q.name), Object.keys(stats.topics));
    for (const q of queues) {
      const t = stats.topics[q.name];
      for (const f of ["depth", "in_flight", "delayed", "oldest_age_seconds"]) {
        assertEquals(t[f], q[f], `${q.name} ${f}: stats ${t[f]}, queues ${q[f]}`);
      }
      assertEquals(Object.keys(t.groups).filter((g) => g !== "").sort(), [...q.groups].sort());
      assertEquals(valueOf(m, "ferry_queue_depth", { topic: q.name }), q.depth);
      for (const [g, gs] of Object.entries<Json>(t.groups)) {
        const labels = { topic: q.name, group: g };
        assertEquals(
          valueOf(m, "ferry_queue_in_flight", labels),
          gs.in_flight,
          `${q.name}/${g}`,
        );
        assertEquals(
          valueOf(m, "ferry_oldest_message_age_seconds", labels),
          gs.oldest_age_seconds,
        );
      }
    }
    const sum = (name: string) =>
      m.filter((x) => x.name === name).reduce((acc, x) => acc + x.value, 0);
    assertEquals(sum("ferry_messages_published_total"), stats.totals.published);
    assertEquals(sum("ferry_messages_delivered_total"), stats.totals.delivered);
    assertEquals(sum("ferry_messages_acked_total"), stats.totals.acked);
    assertEquals(sum("ferry_messages_requeued_total"), stats.totals.requeued);
    assertEquals(sum("ferry_messages_dead_lettered_total"), stats.totals.dead_lettered);
    assertEquals(sum("ferry_messages_expired_total"), stats.totals.expired);
  });
});

Deno.test("GET /api/cluster/status answers the standalone form; node_id survives a restart", async () => {
  const first = await startBroker({});
  let nodeId: string;
  try {
    const res = await call(first.url, "GET", "/api/cluster/status");
    assertEquals(res.status, 200, res.text);
    const s = res.body;
    assertEquals(Object.keys(s), ["mode", "node_id", "role", "term", "leader", "peers"]);
    assertEquals(s.mode, "standalone");
    assertMatch(s.node_id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assertEquals(s.role, "leader");
    assertEquals(s.term, 0);
    assertEquals(s.leader, new URL(first.url).host);
    assertEquals(s.peers, []);
    nodeId = s.node_id;
  } finally {
    await first.close({ keepData: true });
  }
  const second = await startBroker({ dataDir: first.dataDir });
  try {
    const again = (await call(second.url, "GET", "/api/cluster/status")).body;
    assertEquals(again.node_id, nodeId);
  } finally {
    await second.close();
  }
});

Deno.test("GET /healthz has exactly status, version, uptime_seconds when standalone", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("GET", "/healthz");
    assertEquals(res.status, 200);
    assertEquals(Object.keys(res.body).sort(), ["status", "uptime_seconds", "version"]);
  });
});
