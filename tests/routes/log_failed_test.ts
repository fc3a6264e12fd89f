/**
 * A topic whose log failed, through the HTTP server: every change to it is refused with 503
 * `storage_failed` before anything changes, nothing it could not write is held or delivered,
 * reads go on, and the other topics are not touched (docs/operating.md, "Disk").
 */

import { assert, assertEquals, assertMatch } from "../_support/assert.ts";
import { assertProblem, consume, publish, tryPublish } from "../_support/http.ts";
import { withBroker } from "../_support/server.ts";
import { silentLogger } from "../../lib/log.ts";
import { FileWal } from "../../lib/storage/file_wal.ts";

/** Asserts the refusal of a failed log's topic: 503, its code, the topic, a Retry-After. */
function assertLogFailed(res: Parameters<typeof assertProblem>[0], action: string): void {
  assertProblem(res, 503, "storage_failed");
  assert(res.headers.get("retry-after"), "Retry-After missing");
  assertMatch(res.body.detail, new RegExp(`^Cannot ${action} "orders": its log failed \\(`));
  assertMatch(res.body.detail, /restart on a healthy disk$/);
}

Deno.test("a publish whose log cannot be written is refused (503 storage_failed), and never held nor delivered", async () => {
  await withBroker({}, async (ctx) => {
    // The topic's file cannot be opened: a directory stands where it would be.
    await Deno.mkdir(`${ctx.dataDir}/orders.wal`);
    const first = await tryPublish(ctx, "orders", "lost");
    assertLogFailed(first, "write to");
    const second = await tryPublish(ctx, "orders", "refused");
    assertLogFailed(second, "publish to");
    const batch = await ctx.call("POST", "/publish/orders/batch", {
      json: [{ payload_text: "b" }],
    });
    assertLogFailed(batch, "publish to");
    const dashboard = await ctx.call("POST", "/api/queues/publish", {
      json: { queue: "orders", payload: "d" },
    });
    assertLogFailed(dashboard, "publish to");

    // Nothing is held, nothing is handed out.
    const peek = await ctx.call("GET", "/api/queues/peek?queue=orders");
    assertEquals(peek.status, 200, peek.text);
    assertEquals(peek.body, []);
    assertLogFailed(await ctx.call("GET", "/consume/orders"), "consume from");
    const listed = await ctx.call("GET", "/api/queues");
    const orders = listed.body.find((q: { name: string }) => q.name === "orders");
    assertEquals(orders?.depth ?? 0, 0, listed.text);

    // The node says it is unhealthy; another topic works as before.
    assertEquals((await ctx.call("GET", "/healthz")).status, 503);
    await publish(ctx, "other", "fine");
    assertEquals(atob((await consume(ctx, "other")).payload), "fine");
  });
});

Deno.test("a topic whose log failed refuses ack, requeue, touch, redrive and purge (503 storage_failed); its lease stays", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "orders", "a");
    await publish(ctx, "orders", "b");
    const msg = await consume(ctx, "orders");
    // Its log fails for good: the next write finds no file to open.
    const topic = ctx.broker.findTopic("orders")!;
    topic.wal = new FileWal(`${ctx.dataDir}/missing/orders.wal`, ctx.dataDir, 0, {
      fsync: "always",
      log: silentLogger,
    });
    await topic.wal.append({ type: 7, seq: topic.nextSeq() } as never).durable.catch(() => {});
    assert(topic.wal.failed, "the log failed");

    assertLogFailed(await ctx.call("POST", `/ack/orders/${msg.id}`), "ack in");
    assertLogFailed(
      await ctx.call("POST", "/requeue", {
        json: { topic: "orders", id: msg.id },
      }),
      "requeue in",
    );
    assertLogFailed(
      await ctx.call("POST", `/touch/orders/${msg.id}`),
      "touch a message of",
    );
    assertLogFailed(await ctx.call("POST", "/api/queues/redrive?queue=orders"), "redrive");
    assertLogFailed(await ctx.call("DELETE", "/api/queues/purge?queue=orders"), "purge");
    assertLogFailed(await tryPublish(ctx, "orders", "c"), "publish to");

    // Nothing changed: both messages are held, the first still in flight; a lease end that
    // cannot be recorded is left alone.
    await ctx.tick(60_000);
    assertEquals(topic.messages.size, 2);
    assertEquals(topic.defaultGroup.inFlightCount, 1);
    const peek = await ctx.call("GET", "/api/queues/peek?queue=orders");
    assertEquals(peek.body.map((m: { payload: string }) => atob(m.payload)), ["b"], peek.text);
  });
});
