/**
 * Ack, batch ack, requeue, dead-lettering, visibility timeouts, touch and redrive through the
 * HTTP server.
 */

import { assert, assertEquals } from "../_support/assert.ts";
import {
  assertEmpty,
  assertProblem,
  consume,
  deadLetter,
  type Json,
  publish,
  requeue,
  textOf,
} from "../_support/http.ts";
import { withBroker } from "../_support/server.ts";
import { SCHEMAS } from "../../protocol/schemas.ts";

Deno.test("POST /ack/{topic}/{id} answers 204 and the message is gone for good", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "ack", "x");
    const m = await consume(ctx, "ack");
    const res = await ctx.call("POST", `/ack/ack/${m.id}`);
    assertEquals(res.status, 204);
    assertEquals(res.text, "");
    assert(res.headers.get("x-request-id"));
    await ctx.tick(60_000); // past any lease: an acked message never comes back
    await assertEmpty(ctx, "ack");
    assertProblem(await ctx.call("POST", `/ack/ack/${m.id}`), 404, "message_not_found");
  });
});

Deno.test("POST /ack/{topic}/{id} with an unknown id is 404 message_not_found", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "ack", "x");
    const unknown = "01890000-0000-7000-8000-000000000000";
    assertProblem(await ctx.call("POST", `/ack/ack/${unknown}`), 404, "message_not_found");
    assertProblem(await ctx.call("POST", "/ack/ack/not-a-uuid"), 404, "message_not_found");
    const m = await consume(ctx, "ack");
    assertProblem(await ctx.call("POST", `/ack/other/${m.id}`), 404);
  });
});

Deno.test("POST /ack/{topic} acks a batch: 200 {acked, not_found}", async () => {
  await withBroker({}, async (ctx) => {
    for (const t of ["a", "b", "c"]) await publish(ctx, "batch", t);
    const ms = await consume(ctx, "batch", "limit=3");
    const missing = "01890000-0000-7000-8000-000000000001";
    const res = await ctx.call("POST", "/ack/batch", {
      json: { ids: [ms[0].id, ms[2].id, missing] },
    });
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body, { acked: 2, not_found: [missing] });
    await ctx.tick(31_000);
    const back = await consume(ctx, "batch", "limit=10");
    assertEquals(back.map(textOf), ["b"], "only the un-acked message comes back");
  });
});

Deno.test("POST /ack with ?group= acks that group's copy only", async () => {
  await withBroker({}, async (ctx) => {
    const g = await ctx.call("POST", "/api/groups", { json: { topic: "ga", group: "billing" } });
    assertEquals(g.status, 201, g.text);
    await publish(ctx, "ga", "x");
    const mine = await consume(ctx, "ga", "group=billing");
    assertEquals(mine.group, "billing");
    const theirs = await consume(ctx, "ga");
    assertEquals(theirs.id, mine.id);
    assertEquals((await ctx.call("POST", `/ack/ga/${mine.id}?group=billing`)).status, 204);
    assertProblem(await ctx.call("POST", `/ack/ga/${mine.id}?group=billing`), 404);
    // The default group's delivery is still in flight and can be acked.
    assertEquals((await ctx.call("POST", `/ack/ga/${theirs.id}`)).status, 204);
  });
});

Deno.test("POST /ack/{topic}?group= acks a batch of that group", async () => {
  await withBroker({}, async (ctx) => {
    await ctx.call("POST", "/api/groups", { json: { topic: "gb", group: "audit" } });
    for (const t of ["a", "b"]) await publish(ctx, "gb", t);
    const ms = await consume(ctx, "gb", "group=audit&limit=2");
    const res = await ctx.call("POST", "/ack/gb?group=audit", {
      json: { ids: ms.map((m: Json) => m.id) },
    });
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body, { acked: 2, not_found: [] });
    // The default group still has both messages.
    assertEquals((await consume(ctx, "gb", "limit=10")).length, 2);
  });
});

Deno.test("POST /requeue answers {id,topic,retry_count,status,queue} and redelivers", async () => {
  await withBroker({}, async (ctx) => {
    const p = await publish(ctx, "rq", "x");
    const m = await consume(ctx, "rq");
    const r = await requeue(ctx, m);
    assertEquals(r, { id: p.id, topic: "rq", retry_count: 1, status: "requeued", queue: "rq" });
    const again = await consume(ctx, "rq");
    assertEquals(again.id, p.id);
    assertEquals(again.retry_count, 1);
    assertEquals(again.payload_text, "x");
  });
});

Deno.test("POST /requeue ignores the client's payload and counters", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "rqi", "original");
    const m = await consume(ctx, "rqi");
    const r = await requeue(ctx, {
      ...m,
      payload: btoa("forged"),
      payload_text: "forged",
      retry_count: 2,
    });
    assertEquals(r.retry_count, 1);
    assertEquals(r.status, "requeued");
    const again = await consume(ctx, "rqi");
    assertEquals(again.payload_text, "original");
    assertEquals(again.retry_count, 1);
  });
});

Deno.test("POST /requeue takes back every Message Ferry returned, whole, with every field", async () => {
  await withBroker({}, async (ctx) => {
    const sent: Json[] = [];
    const requeueWhole = async (msg: Json, query = "") => {
      sent.push(msg);
      return await requeue(ctx, msg, query);
    };
    // A named group, a TTL, a stored header: group, expires_at and headers are set.
    await ctx.call("POST", "/api/groups", { json: { topic: "whole", group: "g1" } });
    await publish(ctx, "whole", "text", "ttl=1h", { "x-mq-trace": "t-1" });
    const first = await consume(ctx, "whole", "group=g1");
    assertEquals((await requeueWhole(first, "reason=first")).status, "requeued");
    // Consumed again it carries the reason; the in-flight listing adds lease_ends_at.
    await consume(ctx, "whole", "group=g1");
    const listed = await ctx.call("GET", "/api/queues/inflight?queue=whole&group=g1");
    assertEquals(listed.status, 200, listed.text);
    const [item] = listed.body;
    assertEquals([item.reason, item.group, item.retry_count], ["first", "g1", 1]);
    assertEquals((await requeueWhole({ ...item, delay: "0s" })).retry_count, 2);
    // Dead-lettered and redriven, it carries redrive_count.
    await deadLetter(ctx, "whole2", "again");
    assertEquals((await ctx.call("POST", "/api/queues/redrive?queue=whole2")).status, 200);
    const redriven = await consume(ctx, "whole2");
    assertEquals(redriven.redrive_count, 1);
    assertEquals((await requeueWhole(redriven)).status, "requeued");

    const fields = new Set(sent.flatMap((m) => Object.keys(m)));
    const message = Object.keys(SCHEMAS.InFlightItem.properties);
    assertEquals(message.filter((f) => !fields.has(f)), [], "every Message field was sent back");
  });
});

Deno.test("POST /requeue with a field no Message has is 400 bad_request; the message stays in flight", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "rqx", "x");
    const m = await consume(ctx, "rqx");
    const res = await ctx.call("POST", "/requeue", { json: { ...m, resason: "typo" } });
    assertProblem(res, 400, "bad_request");
    assert(
      res.body.detail.startsWith('Unknown field "resason" in the JSON body of POST /requeue'),
      res.body.detail,
    );
    for (const f of ["payload", "lease_ends_at", "reason", "delay"]) {
      assert(res.body.detail.includes(f), `${f} is listed as accepted: ${res.body.detail}`);
    }
    const held = await ctx.call("GET", "/api/queues/inflight?queue=rqx");
    assertEquals(held.body.map((i: Json) => [i.id, i.retry_count]), [[m.id, 0]]);
  });
});

Deno.test("POST /requeue the 3rd time dead-letters into {topic}.dlq", async () => {
  await withBroker({}, async (ctx) => {
    const p = await publish(ctx, "jobs", "poison");
    for (let i = 1; i <= 2; i++) {
      const m = await consume(ctx, "jobs");
      const r = await requeue(ctx, m);
      assertEquals(r, {
        id: p.id,
        topic: "jobs",
        retry_count: i,
        status: "requeued",
        queue: "jobs",
      });
    }
    const m = await consume(ctx, "jobs");
    assertEquals(m.retry_count, 2);
    const r = await requeue(ctx, m);
    assertEquals(r.status, "dead_lettered");
    assertEquals(r.queue, "jobs.dlq");
    assertEquals(r.retry_count, 3);
    assertEquals(r.id, p.id);
    await assertEmpty(ctx, "jobs");
    const dead = await consume(ctx, "jobs.dlq");
    assertEquals(dead.payload_text, "poison");
  });
});

Deno.test("POST /requeue keeps the reason, shown on the dead-lettered message", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "why", "x");
    let m = await consume(ctx, "why");
    await requeue(ctx, m, "reason=first-try");
    m = await consume(ctx, "why");
    await requeue(ctx, { ...m, reason: "second-try" });
    m = await consume(ctx, "why");
    await requeue(ctx, m, "reason=" + encodeURIComponent("parser crashed: bad input"));
    const dead = await consume(ctx, "why.dlq", "peek=true");
    assert(
      JSON.stringify(dead).includes("parser crashed: bad input"),
      `reason not shown in the DLQ: ${JSON.stringify(dead)}`,
    );
  });
});

Deno.test("POST /requeue?delay hides the message again for that long", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "rqd", "x");
    const m = await consume(ctx, "rqd");
    await requeue(ctx, m, "delay=10s");
    await assertEmpty(ctx, "rqd");
    await ctx.tick(9_000);
    await assertEmpty(ctx, "rqd");
    await ctx.tick(1_000);
    assertEquals((await consume(ctx, "rqd")).retry_count, 1);
  });
});

Deno.test("POST /requeue with delay in the body hides the message too", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "rqb", "x");
    const m = await consume(ctx, "rqb");
    await requeue(ctx, { ...m, delay: "5s" });
    await assertEmpty(ctx, "rqb");
    await ctx.tick(5_000);
    assertEquals((await consume(ctx, "rqb")).payload_text, "x");
  });
});

Deno.test("POST /requeue of a message that is not in flight is 404 message_not_found", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "rqn", "x");
    const m = await consume(ctx, "rqn");
    assertEquals((await ctx.call("POST", `/ack/rqn/${m.id}`)).status, 204);
    const res = await ctx.call("POST", "/requeue", { json: m });
    assertProblem(res, 404, "message_not_found");
    const unknown = { ...m, id: "01890000-0000-7000-8000-000000000002" };
    assertProblem(await ctx.call("POST", "/requeue", { json: unknown }), 404, "message_not_found");
  });
});

Deno.test("POST /requeue?group= requeues that group's copy", async () => {
  await withBroker({}, async (ctx) => {
    await ctx.call("POST", "/api/groups", { json: { topic: "rg", group: "g1" } });
    await publish(ctx, "rg", "x");
    const m = await consume(ctx, "rg", "group=g1");
    const r = await requeue(ctx, m, "group=g1");
    assertEquals(r.status, "requeued");
    assertEquals(r.retry_count, 1);
    const again = await consume(ctx, "rg", "group=g1");
    assertEquals(again.retry_count, 1);
    assertEquals(
      (await consume(ctx, "rg")).retry_count,
      0,
      "the default group is untouched",
    );
  });
});

Deno.test("visibility timeout counts as an attempt and dead-letters after 3", async () => {
  await withBroker({}, async (ctx) => {
    const p = await publish(ctx, "crash", "x");
    for (let i = 0; i < 3; i++) {
      const m = await consume(ctx, "crash");
      assertEquals(m.id, p.id);
      assertEquals(m.retry_count, i);
      await ctx.tick(31_000); // default lease is 30s
    }
    await assertEmpty(ctx, "crash");
    const dead = await consume(ctx, "crash.dlq");
    assertEquals(dead.payload_text, "x");
  });
});

Deno.test("visibility from the topic's settings sets the lease", async () => {
  await withBroker({}, async (ctx) => {
    const t = await ctx.call("POST", "/api/topics", { json: { name: "tv", visibility: "5s" } });
    assertEquals(t.status, 201, t.text);
    await publish(ctx, "tv", "x");
    await consume(ctx, "tv");
    await ctx.tick(4_000);
    await assertEmpty(ctx, "tv");
    await ctx.tick(2_000);
    assertEquals((await consume(ctx, "tv")).retry_count, 1);
  });
});

Deno.test("POST /touch/{topic}/{id}?by= extends the lease", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "touch", "x");
    const m = await consume(ctx, "touch", "visibility=10s");
    await ctx.tick(8_000);
    const res = await ctx.call("POST", `/touch/touch/${m.id}?by=30s`);
    assert(res.status >= 200 && res.status < 300, `${res.status} ${res.text}`);
    await ctx.tick(27_000); // 35s: past the first lease; inside the touched one either way
    await assertEmpty(ctx, "touch");
    await ctx.tick(6_000); // 41s: past now+30s and past deadline+30s
    const again = await consume(ctx, "touch");
    assertEquals(again.id, m.id);
    assertEquals(again.retry_count, 1);
  });
});

Deno.test("POST /touch of an unknown or acked message is 404 message_not_found", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "touch2", "x");
    const m = await consume(ctx, "touch2");
    assertEquals((await ctx.call("POST", `/ack/touch2/${m.id}`)).status, 204);
    assertProblem(await ctx.call("POST", `/touch/touch2/${m.id}?by=30s`), 404, "message_not_found");
  });
});

Deno.test("POST /touch/{topic} touches a batch: 200 {touched, not_found, visible_at}", async () => {
  await withBroker({}, async (ctx) => {
    for (const t of ["a", "b", "c"]) await publish(ctx, "tb", t);
    const ms = await consume(ctx, "tb", "limit=3&visibility=10s");
    const missing = "01890000-0000-7000-8000-000000000001";
    await ctx.tick(8_000);
    const res = await ctx.call("POST", "/touch/tb?by=30s", {
      json: { ids: [ms[0].id, ms[2].id, missing, ms[0].id] },
    });
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body.touched, 2);
    assertEquals(res.body.not_found, [missing]);
    assert(typeof res.body.visible_at === "string", res.text);
    assertEquals(res.body.lease_ms, 30_000);
    await ctx.tick(4_000); // 12s: past the first lease: only the untouched one is back
    const back = await consume(ctx, "tb", "limit=10");
    assertEquals([back].flat().map(textOf), ["b"]);
    assertEquals((await ctx.call("POST", `/ack/tb/${[back].flat()[0].id}`)).status, 204);
    await ctx.tick(30_000); // past the touched leases
    const later = await consume(ctx, "tb", "limit=10");
    assertEquals(later.map(textOf).sort(), ["a", "c"]);
  });
});

Deno.test("POST /touch/{topic} takes by and group in the body", async () => {
  await withBroker({}, async (ctx) => {
    await ctx.call("POST", "/api/groups", { json: { topic: "tg", group: "audit" } });
    await publish(ctx, "tg", "x");
    const m = await consume(ctx, "tg", "group=audit&visibility=5s");
    const res = await ctx.call("POST", "/touch/tg", {
      json: { ids: [m.id], by: "1m", group: "audit" },
    });
    assertEquals(
      res.body,
      { touched: 1, not_found: [], visible_at: res.body.visible_at, lease_ms: 60_000 },
      res.text,
    );
    await ctx.tick(30_000);
    await assertEmpty(ctx, "tg", "group=audit");
  });
});

Deno.test("POST /touch/{topic} without ids, or with a bad by, is 400 and touches nothing", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "tx", "x");
    const m = await consume(ctx, "tx", "visibility=5s");
    assertProblem(
      await ctx.call("POST", "/touch/tx", { json: { ids: [] } }),
      400,
      "invalid_parameter",
    );
    assertProblem(await ctx.call("POST", "/touch/tx", { json: {} }), 400, "invalid_parameter");
    assertProblem(
      await ctx.call("POST", "/touch/tx?by=forever", { json: { ids: [m.id] } }),
      400,
      "invalid_duration",
    );
    await ctx.tick(6_000);
    assertEquals((await consume(ctx, "tx")).id, m.id, "the lease was not touched");
  });
});

Deno.test("POST /requeue with dead_letter moves the message to {topic}.dlq at once", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "poison", "bad");
    const m = await consume(ctx, "poison");
    const res = await ctx.call("POST", "/requeue", {
      json: { id: m.id, topic: "poison", reason: "cannot parse", dead_letter: true },
    });
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body.status, "dead_lettered");
    assertEquals(res.body.queue, "poison.dlq");
    await assertEmpty(ctx, "poison");
    const dead = await consume(ctx, "poison.dlq");
    assertEquals([dead.id, dead.reason], [m.id, "cannot parse"]);
    // A dead letter cannot be dead-lettered again.
    assertProblem(
      await ctx.call("POST", "/requeue?dead_letter=true", {
        json: { id: dead.id, topic: "poison.dlq" },
      }),
      400,
      "invalid_parameter",
    );
    assertProblem(
      await ctx.call("POST", "/requeue", {
        json: { id: dead.id, topic: "poison.dlq", dead_letter: "yes" },
      }),
      400,
      "invalid_parameter",
    );
  });
});

Deno.test("POST /api/queues/redrive moves the DLQ back with retry_count 0", async () => {
  await withBroker({}, async (ctx) => {
    await deadLetter(ctx, "rd", "a");
    await deadLetter(ctx, "rd", "b");
    const res = await ctx.call("POST", "/api/queues/redrive?queue=rd");
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body, { queue: "rd", source: "rd.dlq", moved: 2 });
    await assertEmpty(ctx, "rd.dlq");
    const back = await consume(ctx, "rd", "limit=10");
    assertEquals(back.map(textOf).sort(), ["a", "b"]);
    for (const m of back) assertEquals(m.retry_count, 0);
    // It gets a full set of attempts again.
    const r = await requeue(ctx, back[0]);
    assertEquals(r.status, "requeued");
    assertEquals(r.retry_count, 1);

    const none = await ctx.call("POST", "/api/queues/redrive?queue=rd");
    assertEquals(none.status, 200, none.text);
    assertEquals(none.body.moved, 0);
  });
});

Deno.test("a topic named with 197-200 characters dead-letters on lease end and on requeue", async () => {
  await withBroker({}, async (ctx) => {
    for (const n of [197, 200]) {
      const t = "S".repeat(n);
      await publish(ctx, t, "by lease end");
      for (let i = 0; i < 3; i++) {
        assertEquals((await consume(ctx, t, "visibility=1ms")).retry_count, i);
        await ctx.tick(10); // the lease ends; the third end moves it to `${t}.dlq`
      }
      await assertEmpty(ctx, t);
      assertEquals(
        (await consume(ctx, `${t}.dlq`, "peek=true")).payload_text,
        "by lease end",
      );
      const id = await deadLetter(ctx, t, "by requeue");
      const dlq = await consume(ctx, `${t}.dlq`, "limit=10&peek=true");
      assert(dlq.some((m: Json) => m.id === id), `${n}: the requeued message reached the DLQ`);
      const back = await ctx.call("POST", `/api/queues/redrive?queue=${t}.dlq`);
      assertEquals(back.body.moved, 2, back.text);
    }
    assertEquals((await ctx.call("GET", "/healthz")).status, 200);
  });
});
