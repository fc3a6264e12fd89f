/**
 * Webhooks through the HTTP server, pushed to real receivers on loopback: registration,
 * the POST and its signatures (checked by the standardwebhooks reference library and
 * node:crypto), retries on the schedule, the dead-letter queue, 410, and isolation.
 */

import { createHmac } from "node:crypto";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { assert, assertEquals } from "../_support/assert.ts";
import { assertProblem, consume, type Json, publish } from "../_support/http.ts";
import { parseMetrics } from "../_support/metrics.ts";
import { Clock, withBroker } from "../_support/server.ts";
import { LOOPBACK_ALLOW } from "../../lib/push/egress.ts";
import { Logger } from "../../lib/log.ts";

interface Received {
  headers: Headers;
  body: Uint8Array;
}

/** A webhook receiver on loopback that answers each POST with the next scripted status. */
function receiver(statuses: number[] = [200]) {
  const got: Received[] = [];
  const waiting: { n: number; resolve: () => void }[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    got.push({ headers: req.headers, body: new Uint8Array(await req.arrayBuffer()) });
    for (const w of waiting.splice(0)) (got.length >= w.n ? w.resolve : () => waiting.push(w))();
    const status = statuses.length === 1
      ? statuses[0]!
      : statuses[Math.min(got.length - 1, statuses.length - 1)]!;
    return new Response(status === 200 ? "ok" : "nope", { status });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/hook`,
    /** Change it to change the answers from now on (the last entry repeats). */
    statuses,
    got,
    /** Resolves once `n` POSTs have arrived. */
    received: (n: number) =>
      got.length >= n
        ? Promise.resolve()
        : new Promise<void>((resolve) => waiting.push({ n, resolve })),
    close: () => server.shutdown(),
  };
}

const SCHEDULE = [100, 200, 300];

/** A logger that keeps the broker's lines; `find` gives those with a message, parsed. */
function logLines() {
  const lines: string[] = [];
  return {
    log: new Logger("info", (l) => lines.push(l)),
    find: (msg: string) =>
      lines.map((l) => JSON.parse(l)).filter((r: Record<string, unknown>) => r.msg === msg),
  };
}

Deno.test("POST /webhook/{topic} registers a webhook: 201 without its secret; 400 and 409", async () => {
  const logs = logLines();
  await withBroker(
    {},
    async (ctx) => {
      const reg = await ctx.call("POST", "/webhook/orders", {
        json: { url: "https://example.com/hook", secret: "s3cret" },
      });
      assertEquals(reg.status, 201, reg.text);
      assertEquals([reg.body.topic, reg.body.url, reg.body.signed], [
        "orders",
        "https://example.com/hook",
        true,
      ]);
      assert(!reg.text.includes("s3cret"));
      assertProblem(
        await ctx.call("POST", "/webhook/orders", { json: { url: "https://example.com/hook" } }),
        409,
        "already_exists",
      );
      for (const url of ["ftp://x/y", "/relative", "not a url", `https://x/${"a".repeat(2050)}`]) {
        assertProblem(
          await ctx.call("POST", "/webhook/orders", { json: { url } }),
          400,
          "invalid_parameter",
        );
      }
      const listed = await ctx.call("GET", "/api/webhooks?topic=orders");
      assertEquals(listed.body.map((w: Json) => [w.id, w.state, w.pending, w.last_attempt]), [
        [reg.body.id, "active", 0, null],
      ]);
      const del = await ctx.call("DELETE", `/api/webhooks/${reg.body.id}`);
      assertEquals(del.body, { id: reg.body.id, deleted: true });
      assertEquals((await ctx.call("GET", "/api/webhooks?topic=orders")).body, []);
      assertProblem(await ctx.call("DELETE", `/api/webhooks/${reg.body.id}`), 404, "not_found");
      assertEquals(logs.find("webhook removed").map((l) => [l.id, l.topic, l.cause]), [
        [reg.body.id, "orders", "deleted by a client"],
      ]);
    },
    new Clock(),
    logs.log,
  );
});

Deno.test("a publish is POSTed unchanged with its metadata and both signatures", async () => {
  const r = receiver();
  try {
    await withBroker({ webhookAllow: LOOPBACK_ALLOW }, async (ctx) => {
      const secret = `whsec_${btoa("0123456789abcdef0123456789abcdef")}`;
      await ctx.call("POST", "/webhook/orders", { json: { url: r.url, secret } });
      const body = JSON.stringify({ order: 42, note: "naïve" });
      const p = await publish(ctx, "orders", body, "", {
        "content-type": "application/json",
        "x-mq-trace": "t-1",
      });
      await r.received(1);
      const [{ headers, body: got }] = r.got as [Received];
      assertEquals(new TextDecoder().decode(got), body, "the bytes, unchanged");
      assertEquals(headers.get("content-type"), "application/json");
      assertEquals(headers.get("x-ferry-message-id"), p.id);
      assertEquals(headers.get("x-ferry-topic"), "orders");
      assertEquals(headers.get("x-ferry-retry-count"), "0");
      assertEquals(headers.get("x-mq-trace"), "t-1");
      assert(headers.get("user-agent")?.startsWith("ferry/"), headers.get("user-agent") ?? "");
      const key = Uint8Array.fromBase64(secret.slice(6));
      const hex = createHmac("sha256", key).update(got).digest("hex");
      assertEquals(headers.get("x-ferry-signature"), `sha256=${hex}`);
      const verified = new StandardWebhook(secret).verify(body, Object.fromEntries(headers));
      assertEquals(verified, JSON.parse(body), "standardwebhooks accepts webhook-signature");
      // The webhook is a group of its own: pull consumers keep their copy.
      assertEquals((await consume(ctx, "orders")).id, p.id);
    });
  } finally {
    await r.close();
  }
});

Deno.test("a failing endpoint is retried on the schedule, X-Ferry-Retry-Count counting up", async () => {
  const r = receiver([500, 503, 200]);
  try {
    await withBroker(
      { webhookAllow: LOOPBACK_ALLOW, webhookRetryScheduleMs: SCHEDULE },
      async (ctx) => {
        const reg = await ctx.call("POST", "/webhook/jobs", { json: { url: r.url } });
        await publish(ctx, "jobs", "work");
        await r.received(1);
        await waitFor(async () => (await attempts(ctx, reg.body.id)).length === 1);
        await ctx.tick(SCHEDULE[0]! * 1.1 + 1); // the first wait, jitter included
        await r.received(2);
        await waitFor(async () => (await attempts(ctx, reg.body.id)).length === 2);
        await ctx.tick(SCHEDULE[1]! * 1.1 + 1);
        await r.received(3);
        assertEquals(r.got.map((g) => g.headers.get("x-ferry-retry-count")), ["0", "1", "2"]);
        await waitFor(async () => (await attempts(ctx, reg.body.id)).length === 3);
        const log = await attempts(ctx, reg.body.id);
        assertEquals(log.map((a: Json) => [a.status, a.outcome]), [
          [200, "delivered"],
          [503, "retried"],
          [500, "retried"],
        ]);
        const [hook] = (await ctx.call("GET", "/api/webhooks?topic=jobs")).body;
        assertEquals(hook.pending, 0, "delivered and acked");
      },
    );
  } finally {
    await r.close();
  }
});

Deno.test("past the schedule the message goes to {topic}.dlq with the last status as its reason", async () => {
  const r = receiver([503]);
  try {
    await withBroker(
      { webhookAllow: LOOPBACK_ALLOW, webhookRetryScheduleMs: SCHEDULE },
      async (ctx) => {
        const reg = await ctx.call("POST", "/webhook/jobs", { json: { url: r.url } });
        const p = await publish(ctx, "jobs", "doomed");
        for (let attempt = 1; attempt <= SCHEDULE.length + 1; attempt++) {
          await r.received(attempt);
          await waitFor(async () => (await attempts(ctx, reg.body.id)).length === attempt);
          if (attempt <= SCHEDULE.length) await ctx.tick(SCHEDULE[attempt - 1]! * 1.1 + 1);
        }
        const dead = await consume(ctx, "jobs.dlq", "peek=true");
        assertEquals([dead.id, dead.reason, dead.group], [
          p.id,
          "HTTP 503",
          `webhook:${reg.body.id}`,
        ]);
        assertEquals((await attempts(ctx, reg.body.id))[0].outcome, "dead_lettered");
        // With the webhook gone, a redrive must not leave the message in its orphaned group.
        await ctx.call("DELETE", `/api/webhooks/${reg.body.id}`);
        assertEquals((await ctx.call("POST", "/api/queues/redrive?queue=jobs")).body.moved, 1);
        // /metrics has a series for every group of a topic, webhooks' included.
        const groups = parseMetrics((await ctx.call("GET", "/metrics")).text)
          .filter((s) => s.name === "ferry_queue_in_flight" && s.labels.topic === "jobs")
          .map((s) => s.labels.group);
        assertEquals(groups, [""], "no group of the removed webhook comes back");
      },
    );
  } finally {
    await r.close();
  }
});

Deno.test("an endpoint answering 410 Gone removes its webhook, with a log line", async () => {
  const r = receiver([410]);
  const logs = logLines();
  try {
    await withBroker(
      { webhookAllow: LOOPBACK_ALLOW },
      async (ctx) => {
        const reg = await ctx.call("POST", "/webhook/jobs", { json: { url: r.url } });
        await publish(ctx, "jobs", "x");
        await r.received(1);
        // The removal is visible before its WAL record is durable; the log line follows that.
        await waitFor(async () =>
          (await ctx.call("GET", "/api/webhooks?topic=jobs")).body.length === 0 &&
          logs.find("webhook removed").length > 0
        );
        // The line comes once the removal is durable, a moment after the list is empty.
        await waitFor(() => Promise.resolve(logs.find("webhook removed").length > 0), "log line");
        const [line] = logs.find("webhook removed");
        assertEquals([line?.id, line?.topic, line?.cause], [
          reg.body.id,
          "jobs",
          "its endpoint answered 410 Gone",
        ]);
      },
      new Clock(),
      logs.log,
    );
  } finally {
    await r.close();
  }
});

Deno.test("a dead endpoint holds only its own webhook: another one and pull consumers go on", async () => {
  const r = receiver();
  const dead = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const deadUrl = `http://127.0.0.1:${(dead.addr as Deno.NetAddr).port}/gone`;
  dead.close(); // nothing listens there: every POST is refused
  try {
    await withBroker(
      { webhookAllow: LOOPBACK_ALLOW, webhookRetryScheduleMs: [60_000] },
      async (ctx) => {
        const bad = await ctx.call("POST", "/webhook/jobs", { json: { url: deadUrl } });
        await ctx.call("POST", "/webhook/jobs", { json: { url: r.url } });
        for (let i = 0; i < 10; i++) await publish(ctx, "jobs", `m${i}`);
        await r.received(10);
        assertEquals((await consume(ctx, "jobs", "limit=10")).length, 10);
        await waitFor(async () => (await attempts(ctx, bad.body.id)).length >= 4);
        const failed = await attempts(ctx, bad.body.id);
        assert(failed.every((a: Json) => a.status === null && a.error), JSON.stringify(failed[0]));
      },
    );
  } finally {
    await r.close();
  }
});

async function attempts(ctx: { call: (m: string, p: string) => Promise<Json> }, id: string) {
  return (await ctx.call("GET", `/api/webhooks/${id}/attempts`)).body;
}

/** Polls a condition on the broker's answers (the pusher works asynchronously), up to 5 s. */
async function waitFor(cond: () => Promise<boolean>, what = "condition"): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`${what} not met within 5 s`);
}

Deno.test("GET /metrics counts webhook POSTs by topic and outcome, and times them", async () => {
  const r = receiver([200]);
  try {
    await withBroker({ webhookAllow: LOOPBACK_ALLOW }, async (ctx) => {
      const reg = await ctx.call("POST", "/webhook/jobs", { json: { url: r.url } });
      await publish(ctx, "jobs", "x");
      await r.received(1);
      await waitFor(async () => (await attempts(ctx, reg.body.id)).length === 1);
      const text = (await ctx.call("GET", "/metrics")).text;
      const lines = text.split("\n").filter((l) => l.includes("webhook")).join("\n");
      assert(
        text.includes('ferry_webhook_deliveries_total{topic="jobs",outcome="delivered"} 1'),
        lines,
      );
      assert(text.includes('ferry_webhook_duration_seconds_count{topic="jobs"} 1'), lines);
    });
  } finally {
    await r.close();
  }
});

Deno.test("a webhook that keeps failing is paused, probed with backoff, and resumes on a 2xx", async () => {
  const failing = receiver([500]);
  const logs = logLines();
  try {
    await withBroker(
      { webhookAllow: LOOPBACK_ALLOW, webhookRetryScheduleMs: [3_600_000] },
      async (ctx) => {
        const reg = await ctx.call("POST", "/webhook/jobs", { json: { url: failing.url } });
        for (let i = 0; i < 20; i++) await publish(ctx, "jobs", `m${i}`);
        await failing.received(5);
        const hook = async () => (await ctx.call("GET", "/api/webhooks?topic=jobs")).body[0];
        await waitFor(async () => (await hook()).state === "paused");
        await waitFor(async () => (await attempts(ctx, reg.body.id)).length === failing.got.length);
        const atPause = failing.got.length;
        assert(atPause < 20, `paused after ${atPause} POSTs, not hammered with all 20`);
        await ctx.tick(999);
        assertEquals(failing.got.length, atPause, "no probe before its wait");
        await ctx.tick(1); // the first probe: one POST, which fails; the next wait doubles
        await failing.received(atPause + 1);
        await waitFor(async () => (await attempts(ctx, reg.body.id)).length === atPause + 1);
        await ctx.tick(1_999);
        assertEquals(failing.got.length, atPause + 1, "the second probe waits 2 s");
        failing.statuses.splice(0, 1, 200); // the endpoint is back
        await ctx.tick(1);
        await waitFor(async () => (await hook()).state === "active");
        await waitFor(async () => (await hook()).pending === atPause + 1, "the rest delivered");
        const paused = logs.find("webhook paused: its endpoint keeps failing");
        assertEquals(paused.length, 1, "one line per pause, none per failed probe");
        assertEquals([paused[0]?.id, paused[0]?.topic, paused[0]?.reason], [
          reg.body.id,
          "jobs",
          "HTTP 500",
        ]);
        const resumed = logs.find("webhook resumed");
        assertEquals(resumed.map((l) => [l.id, l.topic]), [[reg.body.id, "jobs"]]);
      },
      new Clock(),
      logs.log,
    );
  } finally {
    await failing.close();
  }
});
