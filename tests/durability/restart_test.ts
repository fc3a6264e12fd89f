/**
 * A graceful restart (SIGTERM) keeps every kind of state the WAL holds: delays, TTLs,
 * priorities, X-MQ-* headers, idempotency keys, named groups and their copies, retry counts,
 * dead letters, and topic settings.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import type { MessageJson } from "../../protocol/wire.ts";
import { type ChildBroker, logLines, start, stop, withDataDir } from "../_support/child.ts";
import { consumeList, json, queues, textOf, tryPublish } from "../_support/http.ts";

/** Max queue size of both runs, so the drop-oldest policy can be seen to act after restart. */
const MAX_QUEUE = 12;

async function postJson(
  url: string,
  path: string,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });
  return { status: res.status, body: await json(res) };
}

/** Everything observable without changing state, minus what moves with the clock. */
async function snapshot(url: string): Promise<Record<string, unknown>> {
  const qs = await queues(url);
  const listing: Record<string, unknown> = {};
  for (const [name, q] of [...qs].sort(([a], [b]) => a.localeCompare(b))) {
    const { oldest_age_seconds: _age, ...rest } = q;
    listing[name] = rest;
  }
  const groups = await fetch(`${url}/api/groups?topic=orders`).then((r) => json(r));
  const peek = async (topic: string, group = "") =>
    await consumeList(url, topic, `peek=true&limit=100${group ? `&group=${group}` : ""}`);
  return {
    listing,
    groups,
    orders: await peek("orders"),
    ordersBilling: await peek("orders", "billing"),
    jobs: await peek("jobs"),
    jobsDlq: await peek("jobs.dlq"),
  };
}

/** Moves `topic`'s next message through consume → requeue once; returns the answer. */
async function requeueNext(child: ChildBroker, topic: string, reason: string) {
  const [m] = await consumeList(child.url, topic, "limit=1");
  assert(m, `nothing to requeue in ${topic}`);
  return await postJson(child.url, `/requeue?reason=${reason}`, m);
}

Deno.test({
  name: "SIGTERM and restart keep delays, TTLs, priorities, headers, keys, groups, retries, DLQ",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withDataDir(async (dir) => {
      const env = { BROKER_MAX_QUEUE: String(MAX_QUEUE) };
      let child = await start(dir, env);
      const url = () => child.url;

      // Topic settings and a named group, before any message.
      const topic = await postJson(url(), "/api/topics", {
        name: "orders",
        policy: "drop-oldest",
        retain: "1h",
      });
      assertEquals(topic.status, 201, JSON.stringify(topic.body));
      assertEquals(topic.body.policy, "drop-oldest");
      const group = await postJson(url(), "/api/groups", { topic: "orders", group: "billing" });
      assertEquals(group.status, 201, JSON.stringify(group.body));

      // One message the default group acks and the billing group keeps.
      const first = await tryPublish(url(), "orders", "m-acked", "priority=high");
      assertEquals(first.status, 201);
      const [taken] = await consumeList(url(), "orders", "limit=1");
      assertEquals(taken && textOf(taken), "m-acked");
      const ack = await fetch(`${url()}/ack/orders/${taken!.id}`, { method: "POST" });
      await ack.body?.cancel();
      assertEquals(ack.status, 204);

      const pubs = {
        low: await tryPublish(url(), "orders", "m-low", "priority=low", {
          "X-MQ-Trace": "trace-1",
          "X-MQ-Tenant": "acme",
        }),
        normal: await tryPublish(url(), "orders", "m-normal"),
        high: await tryPublish(url(), "orders", "m-high", "priority=high", {
          "X-MQ-Tenant": "globex",
        }),
        ttl: await tryPublish(url(), "orders", "m-ttl", "ttl=30m"),
        delayed: await tryPublish(url(), "orders", "m-delayed", "delay=1h"),
        idem: await tryPublish(url(), "orders", "m-idem", "", { "Idempotency-Key": "key-1" }),
        auto: await tryPublish(url(), "orders", "m-auto", "idempotency=auto"),
      };
      for (const [k, p] of Object.entries(pubs)) {
        assertEquals(p.status, 201, `${k}: ${p.body}`);
      }
      assert(pubs.delayed.body.visible_at, "a delayed publish answers visible_at");

      // jobs: one message dead-lettered after 3 requeues, one requeued once.
      assertEquals((await tryPublish(url(), "jobs", "j-dead")).status, 201);
      for (let i = 1; i <= 3; i++) {
        const r = await requeueNext(child, "jobs", "boom");
        assertEquals(r.status, 200, JSON.stringify(r.body));
        assertEquals(r.body.retry_count, i);
        assertEquals(r.body.status, i < 3 ? "requeued" : "dead_lettered");
      }
      assertEquals((await tryPublish(url(), "jobs", "j-requeued")).status, 201);
      const once = await requeueNext(child, "jobs", "flaky");
      assertEquals(once.body.status, "requeued");
      assertEquals(once.body.retry_count, 1);

      const before = await snapshot(url());
      const status = await stop(child, "SIGTERM");
      assertEquals(status.code, 0, `exit code after SIGTERM:\n${child.logs.join("\n")}`);
      const lastLines = logLines(child).slice(-5).map((l) => l.msg);
      assert(
        lastLines.some((m) => typeof m === "string" && /stop|shut|drain|clos|exit/i.test(m)),
        `no shutdown log line; last lines: ${JSON.stringify(lastLines)}`,
      );

      child = await start(dir, env);
      const after = await snapshot(url());
      assertEquals(after, before, "state after restart equals state before");

      // Spot checks of what the snapshot holds, so an empty snapshot cannot pass.
      const listing = after.listing as Record<string, Record<string, unknown>>;
      assertEquals(listing.orders?.policy, "drop-oldest");
      assertEquals(listing.orders?.retain, "1h");
      assertEquals(listing.orders?.delayed, 1);
      const orders = after.orders as MessageJson[];
      assertEquals(orders.map(textOf), [
        "m-high",
        "m-normal",
        "m-ttl",
        "m-idem",
        "m-auto",
        "m-low",
      ]);
      const byText = new Map(orders.map((m) => [textOf(m), m]));
      assertEquals(byText.get("m-low")?.headers, {
        "x-mq-trace": "trace-1",
        "x-mq-tenant": "acme",
      });
      assertEquals(byText.get("m-high")?.headers, { "x-mq-tenant": "globex" });
      assertEquals(byText.get("m-low")?.priority, "low");
      assertEquals(byText.get("m-ttl")?.expires_at, pubs.ttl.body.expires_at);
      assertEquals(
        byText.get("m-normal")?.expires_at,
        pubs.normal.body.expires_at,
        "retain TTL",
      );
      assert(byText.get("m-normal")?.expires_at, "retain gives every message a TTL");
      const billing = after.ordersBilling as MessageJson[];
      assertEquals(
        billing.map(textOf),
        ["m-acked", "m-high", "m-normal", "m-ttl", "m-idem", "m-auto", "m-low"],
        "the billing group keeps its own copies, including the one the default group acked",
      );
      const jobs = after.jobs as MessageJson[];
      assertEquals(jobs.map((m) => [textOf(m), m.retry_count]), [["j-requeued", 1]]);
      const dlq = after.jobsDlq as MessageJson[];
      assertEquals(dlq.map(textOf), ["j-dead"]);
      assertEquals(dlq[0]?.retry_count, 3);
      assertEquals(
        dlq[0]?.reason,
        "boom",
        "the requeue reason is kept on the dead letter",
      );
      assertEquals(jobs[0]?.reason, "flaky", "the requeue reason is kept on the message");

      // Idempotency keys still dedupe, with the original id.
      const again = await tryPublish(url(), "orders", "other body", "", {
        "Idempotency-Key": "key-1",
      });
      assertEquals(again.status, 200, JSON.stringify(again.body));
      assertEquals(again.body.deduplicated, true);
      assertEquals(again.body.id, pubs.idem.body.id);
      const autoAgain = await tryPublish(url(), "orders", "m-auto", "idempotency=auto");
      assertEquals(autoAgain.status, 200, JSON.stringify(autoAgain.body));
      assertEquals(autoAgain.body.id, pubs.auto.body.id);

      // The delayed message is still hidden.
      const ready = await consumeList(url(), "orders", "peek=true&limit=100");
      assert(!ready.some((m) => textOf(m) === "m-delayed"), "m-delayed became visible early");

      // The drop-oldest policy still acts: publishing past the limit never answers 429.
      for (let i = 0; i < MAX_QUEUE; i++) {
        const p = await tryPublish(url(), "orders", `fill-${i}`);
        assertEquals(p.status, 201, `fill-${i}: ${JSON.stringify(p.body)}`);
      }
      const full = (await queues(url())).get("orders");
      assert(full, "orders listed");
      assert(full.depth + full.delayed + full.in_flight <= MAX_QUEUE, JSON.stringify(full));

      // A redrive after the restart brings the dead letter back with retry_count 0.
      const redrive = await fetch(`${url()}/api/queues/redrive?queue=jobs`, { method: "POST" });
      const rd = await json<Record<string, unknown>>(redrive);
      assertEquals(redrive.status, 200, JSON.stringify(rd));
      assertEquals(rd.moved, 1);
      const all = await consumeList(url(), "jobs", "limit=10&auto_ack=true");
      assertEquals(
        all.map((m) => [textOf(m), m.retry_count]).sort(),
        [["j-dead", 0], ["j-requeued", 1]],
      );

      assertEquals((await stop(child, "SIGTERM")).code, 0);
    }),
});
