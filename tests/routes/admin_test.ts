/**
 * Topic creation (POST /api/topics) and consumer groups (POST/GET /api/groups, ?group= on
 * consume) through the HTTP server.
 */

import { assert, assertEquals, assertMatch } from "../_support/assert.ts";
import {
  assertEmpty,
  assertProblem,
  consume,
  ISO_UTC,
  type Json,
  publish,
  settle,
} from "../_support/http.ts";
import { withBroker } from "../_support/server.ts";
import { exists, walPath } from "../_support/files.ts";

/** Group names from GET /api/groups, whether it lists strings or group objects. */
function groupNames(body: Json): string[] {
  const list: Json[] = Array.isArray(body) ? body : body?.groups;
  assert(Array.isArray(list), `no group list in ${JSON.stringify(body)}`);
  return list.map((g) => typeof g === "string" ? g : g.group ?? g.name);
}

Deno.test("POST /api/topics answers 201 with the topic, default policy reject", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("POST", "/api/topics", { json: { name: "orders" } });
    assertEquals(res.status, 201, res.text);
    const t = res.body;
    for (const k of ["name", "policy", "retain", "visibility", "max_messages", "created_at"]) {
      assert(k in t, `topic lacks ${k}: ${res.text}`);
    }
    assertEquals(t.name, "orders");
    assertEquals(t.policy, "reject");
    assertMatch(t.created_at, ISO_UTC);
    assertEquals(typeof t.max_messages, "number");
  });
});

Deno.test("POST /api/topics keeps policy, retain and visibility as given", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("POST", "/api/topics", {
      json: { name: "logs", policy: "drop-oldest", retain: "1h", visibility: "2m" },
    });
    assertEquals(res.status, 201, res.text);
    assertEquals(res.body.name, "logs");
    assertEquals(res.body.policy, "drop-oldest");
    assertEquals(res.body.retain, "1h");
    assertEquals(res.body.visibility, "2m");
  });
});

Deno.test("POST /api/topics for an existing topic is 409 already_exists", async () => {
  await withBroker({}, async (ctx) => {
    assertEquals(
      (await ctx.call("POST", "/api/topics", { json: { name: "t" } })).status,
      201,
    );
    assertProblem(
      await ctx.call("POST", "/api/topics", { json: { name: "t" } }),
      409,
      "already_exists",
    );
    await publish(ctx, "auto", "x"); // created by publish
    assertProblem(
      await ctx.call("POST", "/api/topics", { json: { name: "auto" } }),
      409,
      "already_exists",
    );
  });
});

Deno.test("POST /api/topics past BROKER_MAX_TOPICS is 403 topic_limit_reached", async () => {
  await withBroker({ maxTopics: 2 }, async (ctx) => {
    assertEquals(
      (await ctx.call("POST", "/api/topics", { json: { name: "a" } })).status,
      201,
    );
    assertEquals(
      (await ctx.call("POST", "/api/topics", { json: { name: "b" } })).status,
      201,
    );
    const res = await ctx.call("POST", "/api/topics", { json: { name: "c" } });
    assertProblem(res, 403, "topic_limit_reached");
    assertProblem(await ctx.call("POST", "/publish/c", { body: "x" }), 403, "topic_limit_reached");
  });
});

Deno.test("POST /api/topics with a bad policy or retain is 400", async () => {
  await withBroker({}, async (ctx) => {
    assertProblem(
      await ctx.call("POST", "/api/topics", { json: { name: "p", policy: "drop-newest" } }),
      400,
    );
    assertProblem(
      await ctx.call("POST", "/api/topics", { json: { name: "p", retain: "forever" } }),
      400,
      "invalid_duration",
    );
    assertProblem(await ctx.call("POST", "/api/topics", { json: { policy: "reject" } }), 400);
    assertProblem(await ctx.call("POST", "/api/topics", { json: { name: "" } }), 400);
    // None of the refused calls created the topic.
    assertEquals(
      (await ctx.call("POST", "/api/topics", { json: { name: "p" } })).status,
      201,
    );
  });
});

Deno.test("GET /api/topics/{name} answers the topic's settings; GET /api/topics lists them all", async () => {
  await withBroker({}, async (ctx) => {
    const created = await ctx.call("POST", "/api/topics", {
      json: {
        name: "shop",
        policy: "drop-oldest",
        retain: "1h",
        visibility: "45s",
        max_bytes: 4096,
      },
    });
    assertEquals(created.status, 201, created.text);
    await publish(ctx, "auto", "x"); // auto-created, default settings

    const one = await ctx.call("GET", "/api/topics/shop");
    assertEquals(one.status, 200, one.text);
    assertEquals(one.body, created.body);

    const auto = await ctx.call("GET", "/api/topics/auto");
    assertEquals(auto.body.policy, "reject");
    assertEquals(auto.body.retain, null);
    assertEquals(auto.body.visibility, "30s");
    assertEquals(auto.body.max_bytes, null);
    assertMatch(auto.body.created_at, ISO_UTC);

    const all = await ctx.call("GET", "/api/topics");
    assertEquals(all.status, 200, all.text);
    assertEquals(all.body.map((t: Json) => t.name), ["auto", "shop"]);
    assertEquals(all.body[1], created.body);

    assertProblem(await ctx.call("GET", "/api/topics/nope"), 404, "not_found");
    assertProblem(await ctx.call("GET", "/api/topics/bad%20name"), 400, "invalid_name");
  });
});

Deno.test("DELETE /api/topics/{name} deletes the topic and its WAL file, as DELETE /api/queues/delete does", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "doomed", "x");
    await publish(ctx, "doomed2", "x");
    const wal = walPath(ctx.dataDir, "doomed");
    assert(await exists(wal), "publish wrote the topic's WAL file");
    const res = await ctx.call("DELETE", "/api/topics/doomed");
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body, { queue: "doomed", deleted: true });
    assertEquals(await exists(wal), false, "the WAL file is deleted");
    assertProblem(await ctx.call("GET", "/api/topics/doomed"), 404, "not_found");
    assertProblem(await ctx.call("DELETE", "/api/topics/doomed"), 404, "not_found");
    assertProblem(await ctx.call("DELETE", "/api/topics/never"), 404, "not_found");
    assertProblem(await ctx.call("DELETE", "/api/topics/bad%20name"), 400, "invalid_name");
    // The spec's form answers the same.
    const old = await ctx.call("DELETE", "/api/queues/delete?queue=doomed2");
    assertEquals([old.status, old.body], [200, { queue: "doomed2", deleted: true }]);
  });
});

Deno.test("POST /api/groups answers 201 {topic,group,created_at}, 409 when it exists", async () => {
  await withBroker({}, async (ctx) => {
    const res = await ctx.call("POST", "/api/groups", { json: { topic: "gt", group: "billing" } });
    assertEquals(res.status, 201, res.text);
    assertEquals(res.body.topic, "gt");
    assertEquals(res.body.group, "billing");
    assertMatch(res.body.created_at, ISO_UTC);
    assertProblem(
      await ctx.call("POST", "/api/groups", { json: { topic: "gt", group: "billing" } }),
      409,
      "already_exists",
    );
  });
});

Deno.test("GET /api/groups?topic= lists the groups of a topic", async () => {
  await withBroker({}, async (ctx) => {
    for (const group of ["billing", "audit"]) {
      const r = await ctx.call("POST", "/api/groups", { json: { topic: "gl", group } });
      assertEquals(r.status, 201, r.text);
    }
    await ctx.call("GET", "/consume/gl?group=by-consume"); // a first consume creates a group
    await ctx.call("POST", "/api/groups", { json: { topic: "other", group: "elsewhere" } });
    const res = await ctx.call("GET", "/api/groups?topic=gl");
    assertEquals(res.status, 200, res.text);
    const names = groupNames(res.body);
    for (const g of ["billing", "audit", "by-consume"]) assert(names.includes(g), res.text);
    assert(!names.includes("elsewhere"), res.text);
  });
});

Deno.test("GET /consume?group= gives every group its own copy", async () => {
  await withBroker({}, async (ctx) => {
    for (const group of ["billing", "shipping"]) {
      await ctx.call("POST", "/api/groups", { json: { topic: "fan", group } });
    }
    const p = await publish(ctx, "fan", "order-1");
    const d = await consume(ctx, "fan");
    const b = await consume(ctx, "fan", "group=billing");
    const s = await consume(ctx, "fan", "group=shipping");
    for (const m of [d, b, s]) {
      assertEquals(m.id, p.id);
      assertEquals(m.payload_text, "order-1");
    }
    assertEquals(b.group, "billing");
    assertEquals(s.group, "shipping");
    await assertEmpty(ctx, "fan");
    await assertEmpty(ctx, "fan", "group=billing");
    await assertEmpty(ctx, "fan", "group=shipping");
  });
});

Deno.test("a named group receives only messages published after its creation", async () => {
  await withBroker({}, async (ctx) => {
    await publish(ctx, "late", "before");
    const g = await ctx.call("POST", "/api/groups", { json: { topic: "late", group: "new" } });
    assertEquals(g.status, 201, g.text);
    await publish(ctx, "late", "after");
    const got = await consume(ctx, "late", "group=new&limit=10");
    assertEquals(got.map((m: Json) => m.payload_text), ["after"]);

    // A group created by its first consume works the same way.
    await assertEmpty(ctx, "late", "group=lazy");
    await publish(ctx, "late", "later");
    const lazy = await consume(ctx, "late", "group=lazy&limit=10");
    assertEquals(lazy.map((m: Json) => m.payload_text), ["later"]);

    const dflt = await consume(ctx, "late", "limit=10");
    assertEquals(dflt.map((m: Json) => m.payload_text), ["before", "after", "later"]);
  });
});

Deno.test("GET /consume?group=&timeout wakes the group's long-poll", async () => {
  await withBroker({}, async (ctx) => {
    await ctx.call("POST", "/api/groups", { json: { topic: "glp", group: "g" } });
    const waiting = ctx.start("GET", "/consume/glp?group=g&timeout=5s");
    await settle(ctx.url);
    await publish(ctx, "glp", "ping");
    const res = await waiting;
    assertEquals(res.status, 200, res.text);
    assertEquals(res.body.group, "g");
    assertEquals(res.body.payload_text, "ping");
    // The default group still holds its own copy.
    assertEquals((await consume(ctx, "glp")).payload_text, "ping");
  });
});

Deno.test("a message acked by one group stays for the others", async () => {
  await withBroker({}, async (ctx) => {
    await ctx.call("POST", "/api/groups", { json: { topic: "keep", group: "fast" } });
    await ctx.call("POST", "/api/groups", { json: { topic: "keep", group: "slow" } });
    await publish(ctx, "keep", "x");
    const f = await consume(ctx, "keep", "group=fast");
    assertEquals((await ctx.call("POST", `/ack/keep/${f.id}?group=fast`)).status, 204);
    await ctx.tick(60_000);
    assertEquals((await consume(ctx, "keep", "group=slow")).payload_text, "x");
    assertEquals((await consume(ctx, "keep")).payload_text, "x");
    await assertEmpty(ctx, "keep", "group=fast");
  });
});

Deno.test("a .dlq topic counts toward BROKER_MAX_TOPICS unless its topic exists", async () => {
  await withBroker({ maxTopics: 2 }, async (ctx) => {
    await publish(ctx, "x1.dlq", "a");
    await publish(ctx, "x2.dlq", "b");
    assertProblem(
      await ctx.call("POST", "/publish/x3.dlq", { body: "c" }),
      403,
      "topic_limit_reached",
    );
    assertProblem(await ctx.call("POST", "/publish/x1", { body: "c" }), 403, "topic_limit_reached");
  });
  await withBroker({ maxTopics: 1 }, async (ctx) => {
    await publish(ctx, "jobs", "a");
    // The dead-letter queue of an existing topic is always there for dead-lettering.
    await publish(ctx, "jobs.dlq", "b");
    assertProblem(
      await ctx.call("POST", "/publish/other", { body: "c" }),
      403,
      "topic_limit_reached",
    );
  });
});
